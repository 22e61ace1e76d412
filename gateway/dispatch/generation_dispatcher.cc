#include "gateway/dispatch/generation_dispatcher.h"

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status_codes.h"

namespace llmc::gateway {
namespace {

constexpr absl::Duration kShutdownWait = absl::Seconds(5);

}  // namespace

// One dispatched generation: the chain pick → stream → (refused before the first message) pick again.
class DispatchRun final : public DispatchHandle, public std::enable_shared_from_this<DispatchRun> {
 public:
  DispatchRun(GenerationDispatcher& dispatcher, const v1::GenerateRequest& request, absl::Time deadline,
              DispatchCallbacks callbacks)
      : dispatcher_(dispatcher), request_(request), deadline_(deadline), callbacks_(std::move(callbacks)) {}

  void PickNext() {
    std::vector<std::string> excluded;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return Finish(absl::CancelledError("the client went away"));
      excluded = refused_;
    }
    std::shared_ptr<PendingPick> pick = dispatcher_.router_.Pick(
        request_.model(), excluded,
        [self = shared_from_this()](absl::StatusOr<PickedWorker> picked) { self->OnPicked(std::move(picked)); });
    absl::MutexLock lock(&mu_);
    pick_ = std::move(pick);
    if (cancelled_) pick_->Cancel();
  }

  void Cancel() override {
    std::shared_ptr<GenerateCallHandle> call;
    std::shared_ptr<PendingPick> pick;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      call = call_;
      pick = pick_;
    }
    if (pick != nullptr) pick->Cancel();
    if (call != nullptr) call->Cancel();
  }

  void Finish(const absl::Status& status) {
    callbacks_.on_done(status);
    dispatcher_.Forget(this);  // last: the dispatcher may be destroyed once no run is left
  }

 private:
  void OnPicked(absl::StatusOr<PickedWorker> picked) {
    {
      absl::MutexLock lock(&mu_);
      pick_.reset();
    }
    if (!picked.ok()) {
      absl::Status status = picked.status();
      {
        // After refusals, the worker's reason (queue full → 429) says more than "none left to try".
        absl::MutexLock lock(&mu_);
        if (!last_refusal_.ok()) status = last_refusal_;
      }
      return Finish(status);
    }
    LLMC_LOG(Debug).With("request_id", request_.request_id()).With("worker_id", picked->worker_id)
        << "dispatching to " << picked->address << (picked->from_cache ? " (cached routing table)" : "");
    auto self = shared_from_this();
    GenerateCallbacks callbacks{
        [self](v1::GenerateResponse response, ReadNext read_next) {
          {
            absl::MutexLock lock(&self->mu_);
            self->received_ = true;
          }
          self->callbacks_.on_response(std::move(response), std::move(read_next));
        },
        [self, worker_id = picked->worker_id](const grpc::Status& status) { self->OnCallDone(worker_id, status); }};
    const std::shared_ptr<v1::Worker::Stub> stub = dispatcher_.channels_.Stub(picked->address);
    auto call = StartGenerateCall(*stub, request_, deadline_, std::move(callbacks));
    absl::MutexLock lock(&mu_);
    call_ = call;
    if (cancelled_) call->Cancel();
  }

  void OnCallDone(const std::string& worker_id, const grpc::Status& grpc_status) {
    const absl::Status status = FromGrpcStatus(grpc_status);
    bool retry = false;
    {
      absl::MutexLock lock(&mu_);
      call_.reset();
      ++attempts_;
      // INTERNAL before any output is a failed model step: another worker may well succeed.
      const bool refusal = status.code() == absl::StatusCode::kResourceExhausted ||
                           status.code() == absl::StatusCode::kUnavailable ||
                           status.code() == absl::StatusCode::kInternal;
      if (refusal && !received_ && !cancelled_ && attempts_ < dispatcher_.max_attempts_) {
        refused_.push_back(worker_id);
        last_refusal_ = status;
        retry = true;
      }
    }
    if (!retry) return Finish(status);
    if (dispatcher_.on_retry_) dispatcher_.on_retry_();
    LLMC_LOG(Info).With("request_id", request_.request_id()).With("worker_id", worker_id)
        << "worker refused (" << status.message() << "); trying another";
    PickNext();
  }

  GenerationDispatcher& dispatcher_;
  const v1::GenerateRequest request_;
  const absl::Time deadline_;
  const DispatchCallbacks callbacks_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool received_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t attempts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> refused_ ABSL_GUARDED_BY(mu_);
  absl::Status last_refusal_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<GenerateCallHandle> call_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<PendingPick> pick_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<DispatchHandle> GenerationDispatcher::Dispatch(const v1::GenerateRequest& request, absl::Time deadline,
                                                               DispatchCallbacks callbacks) {
  auto run = std::make_shared<DispatchRun>(*this, request, deadline, std::move(callbacks));
  bool accepted = false;
  {
    absl::MutexLock lock(&mu_);
    accepted = !shut_down_;
    if (accepted) runs_.emplace(run.get(), run);
  }
  if (accepted) {
    run->PickNext();
  } else {
    run->Finish(absl::UnavailableError("the gateway is shutting down"));
  }
  return run;
}

void GenerationDispatcher::Forget(DispatchRun* run) {
  absl::MutexLock lock(&mu_);
  runs_.erase(run);
}

void GenerationDispatcher::Shutdown() {
  std::vector<std::shared_ptr<DispatchRun>> live;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (const auto& [raw, weak] : runs_) {
      if (auto run = weak.lock()) live.push_back(std::move(run));
    }
  }
  for (const auto& run : live) run->Cancel();
  live.clear();
  absl::MutexLock lock(&mu_);
  const auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return runs_.empty(); };
  // Cancelled picks and streams end within moments; the bound only guards against a stuck peer.
  if (!mu_.AwaitWithTimeout(absl::Condition(&drained), kShutdownWait)) {
    LLMC_LOG(Warning) << runs_.size() << " generations had not ended when the dispatcher shut down";
  }
}

}  // namespace llmc::gateway
