#ifndef LLMC_WORKER_ENGINE_DELIVERY_QUEUE_H_
#define LLMC_WORKER_ENGINE_DELIVERY_QUEUE_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "llmc/v1/worker.pb.h"
#include "worker/engine/engine.h"

namespace llmc::engine {

// What the engine hands over after a step: a response for a sink, its final status, or both (response first);
// or only a log line or a notice for the worker.
struct Delivery {
  std::shared_ptr<GenerationSink> sink;
  std::optional<v1::GenerateResponse> response;
  std::optional<absl::Status> done;
  std::string log_request_id = {};
  std::string log_line = {};  // logged on the delivery thread, so the engine thread never writes to stderr
  bool log_as_error = false;  // else Info
  std::function<void()> notify = {};
};

// The one thread that calls GenerationSink methods, so the engine thread only queues: a sink's work (gRPC
// writes, locks, logging) never delays the next step. Deliveries run in the order they were pushed. A sink
// must not stop or destroy the engine from its callbacks (the delivery thread would wait for itself).
class DeliveryQueue {
 public:
  DeliveryQueue();
  // Runs whatever is still queued, then stops the thread.
  ~DeliveryQueue();

  void Push(std::vector<Delivery> deliveries);
  // Returns once everything pushed before the call has been delivered.
  void Flush();

 private:
  void Run();

  absl::Mutex mu_;
  std::deque<Delivery> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t pushed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_DELIVERY_QUEUE_H_
