#include "worker/service/generate_reactor.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "worker/service/response_merge.h"

namespace llmc::worker {
namespace {

// Parsing a delta's text costs about as much as copying it (a finished call's JSON is parsed once), so it
// runs here on the engine's delivery path rather than behind another queue.
class StreamSink final : public engine::GenerationSink {
 public:
  StreamSink(std::shared_ptr<GenerateReactor> reactor, std::shared_ptr<TypedOutputState> typed)
      : reactor_(std::move(reactor)), typed_(std::move(typed)) {}
  void OnResponse(v1::GenerateResponse response) override {
    if (typed_ != nullptr) typed_->Apply(response);
    reactor_->Deliver(std::move(response));
  }
  void OnDone(absl::Status status) override { reactor_->Complete(std::move(status)); }

 private:
  const std::shared_ptr<GenerateReactor> reactor_;
  const std::shared_ptr<TypedOutputState> typed_;
};

}  // namespace

GenerateReactor* GenerateReactor::Create(engine::Engine& engine, std::atomic<int64_t>& live_streams,
                                         std::atomic<int64_t>& queued_bytes, size_t max_queued_bytes) {
  auto reactor =
      std::shared_ptr<GenerateReactor>(new GenerateReactor(engine, live_streams, queued_bytes, max_queued_bytes));
  reactor->self_ = reactor;
  ++live_streams;
  return reactor.get();
}

void GenerateReactor::Refuse(const absl::Status& status) { Complete(status); }

void GenerateReactor::Submit(engine::GenerationRequest request, bool echo_prompt,
                             std::shared_ptr<TypedOutputState> typed) {
  // Once the engine has the request it may finish it, and gRPC end the call and release self_, before
  // engine_.Submit returns here. Nothing can release it before that, so the copy is safe to take now.
  const std::shared_ptr<GenerateReactor> keep_alive = self_;
  if (echo_prompt) {
    absl::MutexLock lock(&mu_);
    prompt_to_echo_ = request.prompt_token_ids;
  }
  absl::StatusOr<uint64_t> id =
      engine_.Submit(std::move(request), std::make_shared<StreamSink>(self_, std::move(typed)));
  if (!id.ok()) {
    LLMC_LOG(Debug) << "refused by the engine: " << id.status();
    Complete(id.status());
    return;
  }
  bool abort = false;
  {
    absl::MutexLock lock(&mu_);
    engine_id_ = *id;
    abort = cancelled_ || overflowed_;
  }
  if (abort) engine_.Abort(*id);
}

void GenerateReactor::Deliver(v1::GenerateResponse response) {
  std::optional<uint64_t> abort_id;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || overflowed_) return;
    if (!response.prompt_logprobs().empty()) {
      for (const v1::TokenLogprob& entry : response.prompt_logprobs()) prompt_logprob_bytes_ += entry.ByteSizeLong();
      for (v1::GenerateResponse& part : SplitPromptLogprobs(std::move(response), kPromptLogprobsPartBytes)) {
        Enqueue(std::move(part));
      }
    } else {
      Enqueue(std::move(response));
    }
    if (queued_bytes_ > max_queued_bytes_ + prompt_logprob_bytes_) {
      // The reader takes the answer more slowly than the engine makes it; keeping the rest would let one
      // stream hold any amount of memory. Its generation stops here; the engine's CANCELLED that follows the
      // abort is ignored, as this status came first.
      LLMC_LOG(Warning) << "the stream's reader is too slow: " << queued_bytes_ << " bytes waited; ending it";
      overflowed_ = true;
      DropQueue();
      if (!engine_status_.has_value()) {
        engine_status_ = absl::FailedPreconditionError(absl::StrCat(
            "the client read the answer too slowly: more than ", max_queued_bytes_,
            " bytes of it waited in the worker, so the generation was stopped; read the stream as it comes"));
        abort_id = engine_id_;
      }
    }
  }
  if (abort_id.has_value()) engine_.Abort(*abort_id);
  Pump();
}

void GenerateReactor::Enqueue(v1::GenerateResponse response) {
  // While a write is in flight (the reader is behind), later steps fold into one waiting message. A merged
  // message stops growing at kMaxMergedBytes (far below the gRPC message limit); later steps start the next.
  const size_t bytes = response.ByteSizeLong();
  queued_bytes_ += bytes;
  all_queued_bytes_ += static_cast<int64_t>(bytes);
  if (!pending_.empty() && pending_.back().bytes + bytes <= kMaxMergedBytes) {
    MergeInto(pending_.back().response, std::move(response));
    pending_.back().bytes += bytes;
  } else {
    pending_.push_back({std::move(response), bytes});
  }
}

void GenerateReactor::DropQueue() {
  all_queued_bytes_ -= static_cast<int64_t>(queued_bytes_);
  queued_bytes_ = 0;
  pending_.clear();
}

void GenerateReactor::Complete(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (engine_status_.has_value()) return;
    engine_status_ = std::move(status);
  }
  Pump();
}

void GenerateReactor::Pump() {
  bool write = false;
  grpc::Status finish_status;
  {
    absl::MutexLock lock(&mu_);
    if (write_in_flight_ || finished_) return;
    if (cancelled_) DropQueue();  // nobody is listening any more
    if (!pending_.empty()) {
      in_flight_ = std::move(pending_.front().response);
      queued_bytes_ -= pending_.front().bytes;
      all_queued_bytes_ -= static_cast<int64_t>(pending_.front().bytes);
      pending_.pop_front();
      if (!prompt_to_echo_.empty()) {
        in_flight_.mutable_prompt_token_ids()->Add(prompt_to_echo_.begin(), prompt_to_echo_.end());
        prompt_to_echo_.clear();
      }
      write_in_flight_ = true;
      write = true;
    } else if (engine_status_.has_value()) {
      finished_ = true;
      finish_status = ToGrpcStatus(*engine_status_);
    } else {
      return;
    }
  }
  if (write) {
    StartWrite(&in_flight_);
  } else {
    Finish(finish_status);
  }
}

void GenerateReactor::OnWriteDone(bool ok) {
  if (ok) {
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
    }
    Pump();
    return;
  }
  // The stream broke (the client went away): stop the request and end the call; what the engine still
  // delivers is dropped.
  std::optional<uint64_t> id;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    finished_ = true;
    DropQueue();
    id = engine_status_.has_value() ? std::nullopt : engine_id_;
  }
  if (id.has_value()) engine_.Abort(*id);
  Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke"));
}

void GenerateReactor::OnCancel() {
  std::optional<uint64_t> id;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (!engine_status_.has_value()) id = engine_id_;
  }
  // The engine answers with OnDone(CANCELLED) at its next step, which finishes the call.
  if (id.has_value()) engine_.Abort(*id);
}

void GenerateReactor::OnDone() {
  {
    absl::MutexLock lock(&mu_);
    DropQueue();
  }
  --live_streams_;
  self_.reset();  // may delete this
}

}  // namespace llmc::worker
