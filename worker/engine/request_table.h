#ifndef LLMC_WORKER_ENGINE_REQUEST_TABLE_H_
#define LLMC_WORKER_ENGINE_REQUEST_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "worker/engine/delivery_queue.h"
#include "worker/engine/engine_observer.h"
#include "worker/engine/request_inbox.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/sequence.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::engine {

// The requests the engine thread holds, from the moment it takes them from the inbox until they end. The
// one place where choices end and requests leave: every ending frees the blocks, updates the counts, tells
// the observer and queues exactly one final delivery. What is queued for the sinks waits in an outbox
// until the engine hands it to the delivery thread. Engine thread only.
class RequestTable {
 public:
  RequestTable(const tokenizer::Tokenizer& tokenizer, Scheduler& scheduler, RequestInbox& inbox,
               EngineObserver* observer)
      : tokenizer_(tokenizer), scheduler_(scheduler), inbox_(inbox), observer_(observer) {}

  // Creates the request's choices and queues them with the scheduler.
  void Add(std::unique_ptr<RequestGroup> group);
  RequestGroup* Find(uint64_t id);
  bool empty() const { return groups_.empty(); }
  std::vector<uint64_t> ids() const;

  // A choice of `group` was scheduled for the first time.
  void MarkRunning(RequestGroup& group);
  // `sequence` met a stop condition (`reason`): it leaves the scheduler.
  void FinishChoice(Sequence& sequence, v1::FinishReason reason);
  // A step's deltas for `group`. When every choice has finished, the response carries the usage and the
  // request ends with OK (`reason`: the finish reason of the choice that ended last, for the observer).
  void Respond(RequestGroup& group, v1::GenerateResponse response, v1::FinishReason reason);
  // Ends a request that did not complete: frees its choices and tells the sink `status`.
  void EndEarly(RequestGroup& group, const absl::Status& status, v1::FinishReason reason);
  // Ends every request (the engine is stopping).
  void EndAll(const absl::Status& status);
  // An engine-level error for the log, written on the delivery thread so the engine thread never writes to
  // stderr.
  void LogError(std::string line);
  // Runs `notice` on the delivery thread, in order with the deliveries queued before and after it.
  void Notify(std::function<void()> notice);

  std::vector<Delivery> TakeDeliveries();

 private:
  void Erase(RequestGroup& group);

  const tokenizer::Tokenizer& tokenizer_;
  Scheduler& scheduler_;
  RequestInbox& inbox_;
  EngineObserver* const observer_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<RequestGroup>> groups_;
  std::vector<Delivery> outbox_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_REQUEST_TABLE_H_
