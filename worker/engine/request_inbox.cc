#include "worker/engine/request_inbox.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace llmc::engine {

absl::Status RequestInbox::Open() {
  absl::MutexLock lock(&mu_);
  if (phase_ == Phase::kStopped) return absl::UnavailableError("the engine was stopped");
  if (phase_ != Phase::kNotStarted) return absl::FailedPreconditionError("the engine is already running");
  phase_ = Phase::kOpen;
  return absl::OkStatus();
}

void RequestInbox::Close() {
  absl::MutexLock lock(&mu_);
  if (phase_ == Phase::kOpen) phase_ = Phase::kClosed;
}

void RequestInbox::Stop() {
  absl::MutexLock lock(&mu_);
  phase_ = Phase::kStopped;
}

absl::StatusOr<uint64_t> RequestInbox::Push(std::unique_ptr<RequestGroup> group) {
  absl::MutexLock lock(&mu_);
  switch (phase_) {
    case Phase::kNotStarted:
      return absl::UnavailableError("the engine is not started yet");
    case Phase::kClosed:
      return absl::UnavailableError("the worker is draining and takes no new requests");
    case Phase::kStopped:
      return absl::UnavailableError("the engine has stopped");
    case Phase::kOpen:
      break;
  }
  if (num_not_running_ >= max_waiting_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the waiting queue is full (", max_waiting_, " requests); try another worker"));
  }
  group->id = next_id_++;
  const uint64_t id = group->id;
  incoming_.push_back(std::move(group));
  ++num_not_running_;
  num_unfinished_.fetch_add(1);
  return id;
}

void RequestInbox::Abort(uint64_t id) {
  absl::MutexLock lock(&mu_);
  aborts_.push_back(id);
}

RequestInbox::Inputs RequestInbox::Take(bool idle, absl::Duration idle_wait) {
  Inputs inputs;
  absl::MutexLock lock(&mu_);
  if (idle) {
    const auto has_input = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !incoming_.empty() || !aborts_.empty() || phase_ == Phase::kStopped;
    };
    mu_.AwaitWithTimeout(absl::Condition(&has_input), idle_wait);
  }
  inputs.stopping = phase_ == Phase::kStopped;
  if (inputs.stopping) return inputs;
  inputs.groups.swap(incoming_);
  inputs.aborts.swap(aborts_);
  return inputs;
}

std::vector<std::unique_ptr<RequestGroup>> RequestInbox::TakeLeftovers() {
  std::vector<std::unique_ptr<RequestGroup>> leftovers;
  absl::MutexLock lock(&mu_);
  leftovers.swap(incoming_);
  num_not_running_ -= static_cast<int64_t>(leftovers.size());
  num_unfinished_.fetch_sub(static_cast<int64_t>(leftovers.size()));
  return leftovers;
}

void RequestInbox::StartedRunning() {
  absl::MutexLock lock(&mu_);
  --num_not_running_;
}

void RequestInbox::Ended(bool was_running) {
  if (!was_running) {
    absl::MutexLock lock(&mu_);
    --num_not_running_;
  }
  num_unfinished_.fetch_sub(1);
}

int64_t RequestInbox::num_untaken() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(incoming_.size());
}

}  // namespace llmc::engine
