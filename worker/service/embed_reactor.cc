#include "worker/service/embed_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "common/status_macros.h"

namespace llmc::worker {
namespace {

class EmbeddingSink final : public engine::GenerationSink {
 public:
  EmbeddingSink(std::shared_ptr<EmbedReactor> reactor, size_t index) : reactor_(std::move(reactor)), index_(index) {}

  void OnResponse(v1::GenerateResponse response) override {
    embedding_.mutable_values()->Swap(response.mutable_embedding());
    prompt_tokens_ = response.usage().prompt_tokens();
    embedding_.set_num_tokens(prompt_tokens_);
  }
  void OnDone(absl::Status status) override {
    if (status.ok() && embedding_.values().empty()) {
      status = absl::InternalError("the engine ended an embedding request without its embedding");
    }
    reactor_->InputDone(index_, std::move(status), std::move(embedding_), prompt_tokens_);
  }

 private:
  const std::shared_ptr<EmbedReactor> reactor_;
  const size_t index_;
  v1::Embedding embedding_;
  uint32_t prompt_tokens_ = 0;
};

}  // namespace

EmbedReactor* EmbedReactor::Create(engine::Engine& engine, v1::EmbedResponse* response,
                                   std::atomic<int64_t>& live_calls) {
  auto reactor = std::shared_ptr<EmbedReactor>(new EmbedReactor(engine, response, live_calls));
  reactor->self_ = reactor;
  ++live_calls;
  return reactor.get();
}

bool EmbedReactor::MarkStarted() {
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
    if (!cancelled_before_start_) return true;
  }
  End(absl::CancelledError("the client cancelled the embedding request"));
  return false;
}

void EmbedReactor::Refuse(const absl::Status& status) {
  if (MarkStarted()) End(status);
}

void EmbedReactor::Start(std::vector<engine::GenerationRequest> requests) {
  if (!MarkStarted()) return;
  {
    absl::MutexLock lock(&mu_);
    embeddings_.resize(requests.size());
    engine_ids_.assign(requests.size(), 0);
    requests_ = std::move(requests);
  }
  SubmitMore();
}

void EmbedReactor::SubmitMore() {
  // A sink may end the call, and gRPC release self_, while engine_.Submit runs.
  const std::shared_ptr<EmbedReactor> keep_alive = shared_from_this();
  while (true) {
    size_t index = 0;
    engine::GenerationRequest request;
    {
      absl::MutexLock lock(&mu_);
      if (ended_ || next_ >= requests_.size() || in_flight_ >= kMaxInFlightInputs) return;
      index = next_++;
      ++in_flight_;
      request = std::move(requests_[index]);
    }
    absl::StatusOr<uint64_t> id =
        engine_.Submit(std::move(request), std::make_shared<EmbeddingSink>(keep_alive, index));
    if (!id.ok()) {
      LLMC_LOG(Debug) << "embedding input " << index << " refused by the engine: " << id.status();
      return End(Annotate(id.status(), absl::StrCat("input[", index, "]")));
    }
    bool abort = false;
    {
      absl::MutexLock lock(&mu_);
      // The input may have completed already; only one still running is recorded (or aborted).
      if (embeddings_[index].values().empty()) engine_ids_[index] = *id;
      abort = ended_;
    }
    if (abort) engine_.Abort(*id);
  }
}

void EmbedReactor::InputDone(size_t index, absl::Status status, v1::Embedding embedding, uint32_t prompt_tokens) {
  // The calling sink holds a reference, so the reactor outlives this call.
  if (!status.ok()) return End(Annotate(status, absl::StrCat("input[", index, "]")));
  bool complete = false;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    engine_ids_[index] = 0;
    embeddings_[index] = std::move(embedding);
    prompt_tokens_ += prompt_tokens;
    --in_flight_;
    complete = ++completed_ == embeddings_.size();
    if (complete) {
      for (v1::Embedding& done : embeddings_) *response_->add_embeddings() = std::move(done);
      v1::Usage* usage = response_->mutable_usage();
      usage->set_prompt_tokens(static_cast<uint32_t>(prompt_tokens_));
      usage->set_total_tokens(static_cast<uint32_t>(prompt_tokens_));
      ended_ = true;
    }
  }
  if (complete) return Finish(grpc::Status::OK);
  SubmitMore();
}

void EmbedReactor::End(const absl::Status& status) {
  std::vector<uint64_t> to_abort;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    for (const uint64_t id : engine_ids_) {
      if (id != 0) to_abort.push_back(id);
    }
  }
  for (const uint64_t id : to_abort) engine_.Abort(id);
  Finish(ToGrpcStatus(status));
}

void EmbedReactor::OnCancel() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) {
      cancelled_before_start_ = true;
      return;
    }
  }
  End(absl::CancelledError("the client cancelled the embedding request"));
}

void EmbedReactor::OnDone() {
  --live_calls_;
  self_.reset();
}

}  // namespace llmc::worker
