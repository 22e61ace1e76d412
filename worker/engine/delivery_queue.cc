#include "worker/engine/delivery_queue.h"

#include "common/logging.h"

namespace llmc::engine {

DeliveryQueue::DeliveryQueue() : thread_([this] { Run(); }) {}

DeliveryQueue::~DeliveryQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void DeliveryQueue::Push(std::vector<Delivery> deliveries) {
  if (deliveries.empty()) return;
  absl::MutexLock lock(&mu_);
  pushed_ += deliveries.size();
  for (Delivery& delivery : deliveries) queue_.push_back(std::move(delivery));
}

void DeliveryQueue::Flush() {
  absl::MutexLock lock(&mu_);
  const uint64_t target = pushed_;
  const auto caught_up = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return delivered_ >= target; };
  mu_.Await(absl::Condition(&caught_up));
}

void DeliveryQueue::Run() {
  while (true) {
    std::deque<Delivery> batch;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and nothing left
      batch.swap(queue_);
    }
    for (Delivery& delivery : batch) {
      try {
        if (!delivery.log_line.empty()) {
          if (delivery.log_as_error) {
            LLMC_LOG(Error) << delivery.log_line;
          } else {
            LLMC_LOG(Info).With("request_id", delivery.log_request_id) << delivery.log_line;
          }
        }
        if (delivery.response.has_value()) delivery.sink->OnResponse(std::move(*delivery.response));
        if (delivery.done.has_value()) delivery.sink->OnDone(std::move(*delivery.done));
        if (delivery.notify) delivery.notify();
      } catch (const std::exception& error) {  // a sink's failure must not end the thread every stream uses
        LLMC_LOG(Error).With("request_id", delivery.log_request_id) << "delivery failed: " << error.what();
      }
    }
    absl::MutexLock lock(&mu_);
    delivered_ += batch.size();
  }
}

}  // namespace llmc::engine
