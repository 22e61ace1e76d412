#ifndef LLMC_GATEWAY_DISPATCH_WORKER_RETRY_H_
#define LLMC_GATEWAY_DISPATCH_WORKER_RETRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llmc::gateway {

// When a request moves on to another worker, shared by the generation and unary dispatchers. A refusal
// (UNAVAILABLE: the worker drains or is gone; RESOURCE_EXHAUSTED: its queue is full; INTERNAL: a failed
// model step) that came before any output is tried on another worker, up to `max_attempts` workers in all;
// the workers that refused are left out of the next pick. Not thread-safe: the dispatcher's lock guards it.
class WorkerRetry {
 public:
  explicit WorkerRetry(uint32_t max_attempts) : max_attempts_(max_attempts) {}

  static bool IsRefusal(const absl::Status& status) {
    return status.code() == absl::StatusCode::kUnavailable || status.code() == absl::StatusCode::kResourceExhausted ||
           status.code() == absl::StatusCode::kInternal;
  }

  // An attempt on `worker_id` ended with `status`; `may_retry` is false once output reached the client or
  // the request was cancelled. True when the request should go to another worker.
  bool RetryAfter(const absl::Status& status, const std::string& worker_id, bool may_retry) {
    ++attempts_;
    if (!may_retry || !IsRefusal(status) || attempts_ >= max_attempts_) return false;
    refused_.push_back(worker_id);
    last_refusal_ = status;
    return true;
  }

  // The workers that refused, to leave out of the next pick.
  const std::vector<std::string>& refused() const { return refused_; }
  // The last refusal's status (OK before any): when no worker is left, it says more than "none left to try"
  // (a full queue stays a 429).
  const absl::Status& last_refusal() const { return last_refusal_; }

 private:
  const uint32_t max_attempts_;
  uint32_t attempts_ = 0;
  std::vector<std::string> refused_;
  absl::Status last_refusal_;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_WORKER_RETRY_H_
