#include "worker/service/generate_reactor.h"

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

GenerateReactor* GenerateReactor::Create(engine::Engine& engine, std::atomic<int64_t>& live_streams) {
  auto reactor = std::shared_ptr<GenerateReactor>(new GenerateReactor(engine, live_streams));
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
    abort = cancelled_;
  }
  if (abort) engine_.Abort(*id);
}

void GenerateReactor::Deliver(v1::GenerateResponse response) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    // While a write is in flight (the reader is behind), later steps fold into one waiting message.
    // A merged message stops growing at kMaxMergedBytes (far below the gRPC message limit); later steps
    // start the next one.
    const size_t bytes = response.ByteSizeLong();
    if (!pending_.empty() && pending_bytes_ + bytes <= kMaxMergedBytes) {
      MergeInto(pending_.back(), std::move(response));
      pending_bytes_ += bytes;
    } else {
      pending_.push_back(std::move(response));
      pending_bytes_ = bytes;
    }
  }
  Pump();
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
    if (cancelled_) pending_.clear();  // nobody is listening any more
    if (!pending_.empty()) {
      in_flight_ = std::move(pending_.front());
      pending_.pop_front();
      if (pending_.empty()) pending_bytes_ = 0;
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
    pending_.clear();
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
    pending_.clear();
  }
  --live_streams_;
  self_.reset();  // may delete this
}

}  // namespace llmc::worker
