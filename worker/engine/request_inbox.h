#ifndef LLMC_WORKER_ENGINE_REQUEST_INBOX_H_
#define LLMC_WORKER_ENGINE_REQUEST_INBOX_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/engine/sequence.h"

namespace llmc::engine {

// Where other threads hand requests and aborts to the engine thread, and the counts they read back: the
// only engine state shared between threads (with the load snapshot). It owns the admission limit
// (max_waiting counts requests submitted and not yet running) and the unfinished count drain waits on.
class RequestInbox {
 public:
  explicit RequestInbox(int64_t max_waiting) : max_waiting_(max_waiting) {}

  // From now on Push accepts. FAILED_PRECONDITION when already open, UNAVAILABLE once stopped.
  absl::Status Open();
  // Refuses new requests (draining); what is queued still runs.
  void Close();
  // Refuses new requests and tells the engine thread to stop.
  void Stop();

  // Queues `group` under a fresh id, or refuses it: UNAVAILABLE (not open, draining, stopped),
  // RESOURCE_EXHAUSTED (max_waiting requests not yet running).
  absl::StatusOr<uint64_t> Push(std::unique_ptr<RequestGroup> group);
  void Abort(uint64_t id);

  struct Inputs {
    std::vector<std::unique_ptr<RequestGroup>> groups;
    std::vector<uint64_t> aborts;
    bool stopping = false;
  };
  // Engine thread: what arrived since the last call. When `idle`, first waits up to `idle_wait` for
  // something to arrive.
  Inputs Take(bool idle, absl::Duration idle_wait);
  // After Stop and the engine thread's exit: requests it never took.
  std::vector<std::unique_ptr<RequestGroup>> TakeLeftovers();

  // Engine thread: a request's first choice was scheduled (it stops counting against max_waiting).
  void StartedRunning();
  // Engine thread: a request ended; `was_running` tells whether StartedRunning was called for it.
  void Ended(bool was_running);

  // Requests submitted and not ended.
  int64_t num_unfinished() const { return num_unfinished_.load(); }
  // Requests pushed and not yet taken by the engine thread.
  int64_t num_untaken() const;

 private:
  enum class Phase { kNotStarted, kOpen, kClosed, kStopped };

  const int64_t max_waiting_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<RequestGroup>> incoming_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> aborts_ ABSL_GUARDED_BY(mu_);
  int64_t num_not_running_ ABSL_GUARDED_BY(mu_) = 0;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kNotStarted;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::atomic<int64_t> num_unfinished_{0};
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_REQUEST_INBOX_H_
