#ifndef LLMC_GATEWAY_DISPATCH_UNARY_DISPATCHER_H_
#define LLMC_GATEWAY_DISPATCH_UNARY_DISPATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/dispatch/worker_channels.h"
#include "gateway/dispatch/worker_router.h"
#include "grpcpp/client_context.h"
#include "llmc/v1/worker.grpc.pb.h"

namespace llmc::gateway {

class UnaryRun;

// Starts one unary call on the picked worker (e.g. stub.async()->Tokenize(context, &request, &response,
// ...)) and calls `done` with its status when it ends. Whatever the call reads and writes must outlive it:
// the starter owns it (a shared_ptr captured in the starter and in `done` does).
using UnaryStarter =
    std::function<void(v1::Worker::Stub& stub, grpc::ClientContext* context, std::function<void(grpc::Status)> done)>;

// Runs a short worker call (Tokenize, Detokenize, Embed) on some worker serving the model: picks one
// through the WorkerRouter and, when the call fails with UNAVAILABLE (the worker gone or unreachable),
// RESOURCE_EXHAUSTED (its queue full) or INTERNAL (its model step failed), tries another, excluding those
// that failed, up to `max_attempts` workers. Shutdown cancels every call in flight
// and returns once each has called its `done`, so no callback runs on a destroyed dispatcher.
class UnaryDispatcher {
 public:
  // `attempt_timeout` bounds each worker's answer (0: only the call's deadline): a worker that does not
  // answer by then (stopped, wedged) counts as a refusal, so another is tried; with none left the call ends
  // UNAVAILABLE.
  UnaryDispatcher(WorkerRouter& router, WorkerChannels& channels, uint32_t max_attempts,
                  absl::Duration attempt_timeout = absl::ZeroDuration())
      : router_(router), channels_(channels), max_attempts_(max_attempts), attempt_timeout_(attempt_timeout) {}
  ~UnaryDispatcher() { Shutdown(); }
  UnaryDispatcher(const UnaryDispatcher&) = delete;
  UnaryDispatcher& operator=(const UnaryDispatcher&) = delete;

  // `done` runs once, on some thread: OK, the worker's error, or the routing error (NOT_FOUND for a model
  // nobody serves). After Shutdown: UNAVAILABLE at once. The returned function cancels the call (a pending
  // pick, or the worker call in flight, which then ends with an error); it may be called at any time, also
  // after `done`.
  std::function<void()> Call(const std::string& model, absl::Time deadline, UnaryStarter start,
                             std::function<void(absl::Status)> done);
  // Idempotent.
  void Shutdown();

 private:
  friend class UnaryRun;
  void Forget(UnaryRun* run);

  WorkerRouter& router_;
  WorkerChannels& channels_;
  const uint32_t max_attempts_;
  const absl::Duration attempt_timeout_;
  absl::Mutex mu_;
  absl::flat_hash_map<UnaryRun*, std::weak_ptr<UnaryRun>> runs_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_UNARY_DISPATCHER_H_
