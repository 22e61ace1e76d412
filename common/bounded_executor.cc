#include "common/bounded_executor.h"

#include <exception>
#include <utility>

#include "common/logging.h"

namespace llmc {

BoundedExecutor::BoundedExecutor(int num_threads, size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { Run(); });
}

BoundedExecutor::~BoundedExecutor() { Shutdown(); }

bool BoundedExecutor::TrySubmit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= max_queued_) return false;
  queue_.push_back(std::move(task));
  return true;
}

void BoundedExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void BoundedExecutor::Run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task();
    } catch (const std::exception& error) {  // one task's failure must not end the process
      LLMC_LOG(Error) << "a background task failed: " << error.what();
    }
  }
}

}  // namespace llmc
