#ifndef LLMC_COMMON_BOUNDED_EXECUTOR_H_
#define LLMC_COMMON_BOUNDED_EXECUTOR_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace llmc {

// A few threads for work too heavy for an I/O or RPC callback thread (parsing a multi-MB body, rendering
// and tokenizing a long chat), with a bounded queue: TrySubmit refuses when `max_queued` tasks already
// wait, so a burst of big requests costs bounded memory and the caller can answer "busy" at once.
// Shutdown (and the destructor) runs what is queued, then joins. Thread-safe.
class BoundedExecutor {
 public:
  BoundedExecutor(int num_threads, size_t max_queued);
  ~BoundedExecutor();
  BoundedExecutor(const BoundedExecutor&) = delete;
  BoundedExecutor& operator=(const BoundedExecutor&) = delete;

  // False when the queue is full or the executor is shut down; the task is then not run.
  bool TrySubmit(std::function<void()> task);
  void Shutdown();

 private:
  void Run();

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace llmc

#endif  // LLMC_COMMON_BOUNDED_EXECUTOR_H_
