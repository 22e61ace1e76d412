#include "gateway/dispatch/unary_dispatcher.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "gateway/dispatch/internal_auth_failure.h"
#include "gateway/dispatch/worker_retry.h"

namespace llmc::gateway {

// One call: pick → call → (UNAVAILABLE) pick again.
class UnaryRun final : public std::enable_shared_from_this<UnaryRun> {
 public:
  UnaryRun(UnaryDispatcher& dispatcher, std::string model, absl::Time deadline, UnaryStarter start,
           std::function<void(absl::Status)> done)
      : dispatcher_(dispatcher),
        model_(std::move(model)),
        deadline_(deadline),
        start_(std::move(start)),
        done_(std::move(done)),
        retry_(dispatcher.max_attempts_) {}

  void PickNext() {
    std::vector<std::string> excluded;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return Finish(absl::UnavailableError("the gateway is shutting down"));
      excluded = retry_.refused();
    }
    auto pick = dispatcher_.router_.Pick(
        model_, excluded, /*prefix_hashes=*/{},
        [self = shared_from_this()](absl::StatusOr<PickedWorker> picked) { self->OnPicked(std::move(picked)); });
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      if (!picked_) {
        pick_ = pick;
        cancel = cancelled_;
      }
    }
    if (cancel) pick->Cancel();
  }

  void Cancel() {
    std::shared_ptr<PendingPick> pick;
    std::shared_ptr<grpc::ClientContext> context;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      pick = pick_;
      context = context_;
    }
    if (pick != nullptr) pick->Cancel();
    if (context != nullptr) context->TryCancel();
  }

 private:
  void OnPicked(absl::StatusOr<PickedWorker> picked) {
    auto context = std::make_shared<grpc::ClientContext>();
    // A worker that stopped keeps its connection open: its attempt ends at attempt_timeout, not at the
    // request's deadline, and another is tried.
    absl::Time attempt_deadline = deadline_;
    const absl::Duration attempt_timeout = dispatcher_.attempt_timeout_;
    if (attempt_timeout > absl::ZeroDuration()) attempt_deadline = std::min(deadline_, absl::Now() + attempt_timeout);
    context->set_deadline(absl::ToChronoTime(attempt_deadline));
    bool cancelled = false;
    absl::Status last_failure;
    {
      absl::MutexLock lock(&mu_);
      picked_ = true;
      pick_.reset();
      cancelled = cancelled_;
      last_failure = retry_.last_refusal();
      if (picked.ok() && !cancelled) context_ = context;
    }
    if (cancelled) return Finish(absl::UnavailableError("the gateway is shutting down"));
    // After a worker failed, its reason says more than "none left to try".
    if (!picked.ok()) return Finish(last_failure.ok() ? picked.status() : last_failure);
    const std::shared_ptr<v1::Worker::Stub> stub = dispatcher_.channels_.Stub(picked->address);
    start_(*stub, context.get(),
           [self = shared_from_this(), context, worker_id = picked->worker_id](const grpc::Status& status) {
             self->OnCallDone(worker_id, status);
           });
  }

  void OnCallDone(const std::string& worker_id, const grpc::Status& grpc_status) {
    absl::Status status = IsInternalAuthFailure(grpc_status)
                              ? InternalAuthFailure("a worker", absl::StrCat("worker ", worker_id), grpc_status)
                              : FromGrpcStatus(grpc_status);
    const absl::Duration attempt_timeout = dispatcher_.attempt_timeout_;
    if (status.code() == absl::StatusCode::kDeadlineExceeded && attempt_timeout > absl::ZeroDuration() &&
        absl::Now() < deadline_) {
      status = absl::UnavailableError(
          absl::StrCat("worker ", worker_id, " did not answer within ", absl::FormatDuration(attempt_timeout)));
    }
    bool retry = false;
    {
      absl::MutexLock lock(&mu_);
      context_.reset();
      picked_ = false;
      retry = retry_.RetryAfter(status, worker_id, /*may_retry=*/!cancelled_);
    }
    if (!retry) return Finish(status);
    LLMC_LOG(Info).With("worker_id", worker_id) << "worker refused (" << status.message() << "); trying another";
    PickNext();
  }

  void Finish(const absl::Status& status) {
    std::function<void(absl::Status)> done = std::move(done_);
    done_ = nullptr;
    start_ = nullptr;
    if (done) done(status);
    done = nullptr;  // what the caller's callback holds goes while the dispatcher is still there
    dispatcher_.Forget(this);
  }

  UnaryDispatcher& dispatcher_;
  const std::string model_;
  const absl::Time deadline_;
  UnaryStarter start_;                      // used by one callback at a time, cleared by Finish
  std::function<void(absl::Status)> done_;  // likewise
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool picked_ ABSL_GUARDED_BY(mu_) = false;  // the current pick has been answered
  std::shared_ptr<PendingPick> pick_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(mu_);
  WorkerRetry retry_ ABSL_GUARDED_BY(mu_);
};

std::function<void()> UnaryDispatcher::Call(const std::string& model, absl::Time deadline, UnaryStarter start,
                                            std::function<void(absl::Status)> done) {
  auto run = std::make_shared<UnaryRun>(*this, model, deadline, std::move(start), std::move(done));
  bool accepted = false;
  {
    absl::MutexLock lock(&mu_);
    accepted = !shut_down_;
    if (accepted) runs_.emplace(run.get(), run);
  }
  if (!accepted) {
    // Never registered, so Forget finds nothing to erase.
    run->Cancel();
  }
  run->PickNext();
  return [weak = std::weak_ptr<UnaryRun>(run)] {
    if (const std::shared_ptr<UnaryRun> live = weak.lock()) live->Cancel();
  };
}

void UnaryDispatcher::Forget(UnaryRun* run) {
  absl::MutexLock lock(&mu_);
  runs_.erase(run);
}

void UnaryDispatcher::Shutdown() {
  std::vector<std::shared_ptr<UnaryRun>> live;
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
  while (!mu_.AwaitWithTimeout(absl::Condition(&drained), absl::Seconds(5))) {
    LLMC_LOG(Warning) << "shutting down: waiting for " << runs_.size() << " worker calls to end";
  }
}

}  // namespace llmc::gateway
