#include "gateway/dispatch/generation_dispatcher.h"

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "gateway/dispatch/internal_auth_failure.h"
#include "gateway/dispatch/prefix_routing.h"
#include "gateway/dispatch/worker_retry.h"
#include "grpcpp/alarm.h"

namespace llmc::gateway {
namespace {

constexpr absl::Duration kShutdownLogInterval = absl::Seconds(5);

}  // namespace

// One dispatched generation: the chain pick → stream → (refused before the first message) pick again.
class DispatchRun final : public DispatchHandle, public std::enable_shared_from_this<DispatchRun> {
 public:
  DispatchRun(GenerationDispatcher& dispatcher, const v1::GenerateRequest& request, absl::Time deadline,
              DispatchCallbacks callbacks)
      : dispatcher_(dispatcher),
        request_(request),
        prefix_hashes_(RequestPrefixHashes(request)),
        deadline_(deadline),
        callbacks_(std::move(callbacks)),
        retry_(dispatcher.options_.max_attempts) {}

  void PickNext() {
    std::vector<std::string> excluded;
    uint64_t round = 0;
    absl::Status cancelled;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) {
        cancelled = cancel_reason_;
      } else {
        excluded = retry_.refused();
        round = ++pick_round_;
      }
    }
    if (!cancelled.ok()) return Finish(cancelled);
    std::shared_ptr<PendingPick> pick =
        dispatcher_.router_.Pick(request_.model(), excluded, prefix_hashes_,
                                 [self = shared_from_this(), round](absl::StatusOr<PickedWorker> picked) {
                                   self->OnPicked(round, std::move(picked));
                                 });
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      // The answer may have come already (then there is nothing left to cancel).
      if (answered_round_ < round) {
        pick_ = pick;
        cancel = cancelled_;
      }
    }
    if (cancel) pick->Cancel();
  }

  void Cancel() override { CancelWith(absl::CancelledError("the client went away")); }

  // Stops the run wherever it is; on_done gets `reason` unless the worker's own status comes first.
  void CancelWith(absl::Status reason) {
    std::shared_ptr<GenerateCallHandle> call;
    std::shared_ptr<PendingPick> pick;
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) cancel_reason_ = std::move(reason);
      cancelled_ = true;
      call = call_;
      pick = pick_;
    }
    if (pick != nullptr) pick->Cancel();
    if (call != nullptr) call->Cancel();
  }

  // Calls on_done, then lets go of the caller's callbacks (and what they hold) while the dispatcher is
  // still there, and last tells the dispatcher, which may be destroyed once no run is left.
  void Finish(const absl::Status& status) {
    std::unique_ptr<grpc::Alarm> alarm;
    {
      absl::MutexLock lock(&mu_);
      alarm = std::move(accept_alarm_);
    }
    alarm.reset();
    DispatchCallbacks callbacks = std::move(callbacks_);
    callbacks_ = {};
    callbacks.on_done(status);
    callbacks = {};
    dispatcher_.Forget(this);
  }

 private:
  void OnPicked(uint64_t round, absl::StatusOr<PickedWorker> picked) {
    absl::Status refusal, cancelled;
    {
      absl::MutexLock lock(&mu_);
      answered_round_ = round;
      pick_.reset();
      refusal = retry_.last_refusal();
      if (cancelled_) cancelled = cancel_reason_;
    }
    // Cancelled meanwhile: end with the cancellation's reason, without sending the request to a worker.
    if (!cancelled.ok()) return Finish(cancelled);
    // After refusals, the worker's reason (queue full → 429) says more than "none left to try".
    if (!picked.ok()) return Finish(refusal.ok() ? picked.status() : refusal);
    LLMC_LOG(Debug).With("request_id", request_.request_id()).With("worker_id", picked->worker_id)
        << "dispatching to " << picked->address << (picked->from_cache ? " (cached routing table)" : "");
    auto self = shared_from_this();
    std::unique_ptr<grpc::Alarm> alarm;
    const uint64_t attempt = BeginAttempt(alarm);
    GenerateCallbacks callbacks{[self] { self->OnAccepted(); },
                                [self](v1::GenerateResponse response, ReadNext read_next) {
                                  {
                                    absl::MutexLock lock(&self->mu_);
                                    self->received_ = true;
                                  }
                                  self->callbacks_.on_response(std::move(response), std::move(read_next));
                                },
                                [self, attempt, worker_id = picked->worker_id](const grpc::Status& status) {
                                  self->OnCallDone(attempt, worker_id, status);
                                }};
    const std::shared_ptr<v1::Worker::Stub> stub = dispatcher_.channels_.Stub(picked->address);
    auto call = StartGenerateCall(*stub, request_, deadline_, std::move(callbacks));
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      // The call may have ended already, and a retry begun: then neither belongs to the current attempt.
      if (attempt == attempts_started_ && ended_attempt_ < attempt) {
        call_ = call;
        cancel = cancelled_ || accept_timed_out_;
        if (!accepted_) std::swap(accept_alarm_, alarm);
      }
    }
    if (cancel) call->Cancel();
  }

  // Numbers the next stream and arms its accept timeout into `alarm` (null when none applies). The
  // alarm's callback holds the run weakly: a run that ended needs no alarm (Finish cancels it).
  uint64_t BeginAttempt(std::unique_ptr<grpc::Alarm>& alarm) {
    const absl::Duration timeout = dispatcher_.options_.accept_timeout;
    uint64_t attempt = 0;
    {
      absl::MutexLock lock(&mu_);
      accepted_ = false;
      accept_timed_out_ = false;
      attempt = ++attempts_started_;
    }
    if (timeout <= absl::ZeroDuration() || absl::Now() + timeout >= deadline_) return attempt;
    alarm = std::make_unique<grpc::Alarm>();
    alarm->Set(absl::ToChronoTime(absl::Now() + timeout), [weak = weak_from_this(), attempt](bool fired) {
      if (!fired) return;
      if (auto self = weak.lock()) self->OnAcceptTimeout(attempt);
    });
    return attempt;
  }

  void OnAccepted() {
    std::unique_ptr<grpc::Alarm> alarm;
    {
      absl::MutexLock lock(&mu_);
      accepted_ = true;
      alarm = std::move(accept_alarm_);
    }
    LLMC_LOG(Debug).With("request_id", request_.request_id()) << "the worker accepted the stream";
  }

  void OnAcceptTimeout(uint64_t attempt) {
    std::shared_ptr<GenerateCallHandle> call;
    {
      absl::MutexLock lock(&mu_);
      if (attempt != attempts_started_ || accepted_ || cancelled_) return;
      accept_timed_out_ = true;
      call = call_;
    }
    LLMC_LOG(Debug).With("request_id", request_.request_id()) << "accept timeout: cancelling the stream";
    // Before StartGenerateCall returned, call_ is not set yet: OnPicked cancels it then.
    if (call != nullptr) call->Cancel();
  }

  void OnCallDone(uint64_t attempt, const std::string& worker_id, const grpc::Status& grpc_status) {
    // A worker that refuses the gateway's credentials is tried like a failing one: another may take them.
    absl::Status status = IsInternalAuthFailure(grpc_status)
                              ? InternalAuthFailure("a worker", absl::StrCat("worker ", worker_id), grpc_status)
                              : FromGrpcStatus(grpc_status);
    bool retry = false;
    std::unique_ptr<grpc::Alarm> alarm;
    {
      absl::MutexLock lock(&mu_);
      ended_attempt_ = attempt;
      // The call ended because we cancelled it: say why.
      if (cancelled_ && status.code() == absl::StatusCode::kCancelled) status = cancel_reason_;
      if (accept_timed_out_ && !cancelled_ && status.code() == absl::StatusCode::kCancelled) {
        status = absl::UnavailableError(absl::StrCat("worker ", worker_id, " did not accept the stream within ",
                                                     absl::FormatDuration(dispatcher_.options_.accept_timeout)));
      }
      alarm = std::move(accept_alarm_);
      call_.reset();
      retry = retry_.RetryAfter(status, worker_id, /*may_retry=*/!received_ && !cancelled_);
    }
    if (!retry) return Finish(status);
    if (dispatcher_.on_retry_) dispatcher_.on_retry_();
    LLMC_LOG(Info).With("request_id", request_.request_id()).With("worker_id", worker_id)
        << "worker refused (" << status.message() << "); trying another";
    PickNext();
  }

  GenerationDispatcher& dispatcher_;
  const v1::GenerateRequest request_;
  const std::vector<uint64_t> prefix_hashes_;  // for the prefix_aware policy
  const absl::Time deadline_;
  DispatchCallbacks callbacks_;  // moved out by Finish; until then used by one gRPC callback at a time
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool received_ ABSL_GUARDED_BY(mu_) = false;
  WorkerRetry retry_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<GenerateCallHandle> call_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<PendingPick> pick_ ABSL_GUARDED_BY(mu_);  // the pick of pick_round_, while unanswered
  uint64_t pick_round_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t answered_round_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status cancel_reason_ ABSL_GUARDED_BY(mu_);
  uint64_t attempts_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ended_attempt_ ABSL_GUARDED_BY(mu_) = 0;  // the last stream whose on_done came
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  bool accept_timed_out_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<grpc::Alarm> accept_alarm_ ABSL_GUARDED_BY(mu_);  // while the current worker has not accepted
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

void GenerationDispatcher::BeginShutdown() {
  std::vector<std::shared_ptr<DispatchRun>> live;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (const auto& [raw, weak] : runs_) {
      if (auto run = weak.lock()) live.push_back(std::move(run));
    }
  }
  for (const auto& run : live) run->CancelWith(absl::UnavailableError("the gateway is shutting down"));
}

void GenerationDispatcher::Shutdown() {
  BeginShutdown();
  // gRPC answers every cancelled pick and stream, so this ends; a slow end is logged, not cut short (the
  // callbacks still to come use this object).
  absl::MutexLock lock(&mu_);
  const auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return runs_.empty(); };
  while (!mu_.AwaitWithTimeout(absl::Condition(&drained), kShutdownLogInterval)) {
    LLMC_LOG(Warning) << "shutting down: waiting for " << runs_.size() << " generations to end";
  }
}

}  // namespace llmc::gateway
