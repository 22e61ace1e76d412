#ifndef LLMC_GATEWAY_DISPATCH_GENERATION_DISPATCHER_H_
#define LLMC_GATEWAY_DISPATCH_GENERATION_DISPATCHER_H_

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/dispatch/generate_call.h"
#include "gateway/dispatch/worker_channels.h"
#include "gateway/dispatch/worker_router.h"
#include "llmc/v1/worker.pb.h"

namespace llmc::gateway {

class DispatchRun;

struct DispatchOptions {
  uint32_t max_attempts = 3;
  absl::Duration accept_timeout = absl::Seconds(5);  // zero: no limit but the request's deadline
};

struct DispatchCallbacks {
  // `read_next` must be called once the message is consumed (generate_call.h).
  std::function<void(v1::GenerateResponse response, ReadNext read_next)> on_response;
  // Once, last: OK, or why the generation failed (the worker's status, or the routing error).
  std::function<void(absl::Status status)> on_done;
};

class DispatchHandle {
 public:
  virtual ~DispatchHandle() = default;
  // The client went away: cancels the worker call or the pending pick; on_done still runs.
  virtual void Cancel() = 0;
};

// Runs one generation on some worker: picks one through the WorkerRouter, opens Worker.Generate, and when
// the worker refuses or fails before its first message (RESOURCE_EXHAUSTED: queue full; UNAVAILABLE:
// draining, unhealthy or gone; INTERNAL: its model step failed) tries another, excluding those that
// refused, up to `max_attempts` workers. A worker that does not accept the stream within
// `accept_timeout` (a stopped or wedged process, which its heartbeats have not yet given away) counts
// as refusing.
// Shutdown cancels every generation in flight and returns once each has called on_done, so no callback
// runs on a destroyed dispatcher.
class GenerationDispatcher {
 public:
  // `on_retry` (may be empty) runs each time a generation moves on to another worker.
  GenerationDispatcher(WorkerRouter& router, WorkerChannels& channels, DispatchOptions options,
                       std::function<void()> on_retry = {})
      : router_(router), channels_(channels), options_(options), on_retry_(std::move(on_retry)) {}

  ~GenerationDispatcher() { Shutdown(); }

  // After BeginShutdown (or Shutdown): on_done(UNAVAILABLE) at once.
  std::shared_ptr<DispatchHandle> Dispatch(const v1::GenerateRequest& request, absl::Time deadline,
                                           DispatchCallbacks callbacks);
  // Refuses new generations and cancels every one in flight (each then gets on_done with UNAVAILABLE), without
  // waiting for them to end: a stream whose read is held for a client that stopped reading ends only once that
  // client's connection closes (GatewayServer::Drain, which stops the HTTP server after this). Idempotent.
  void BeginShutdown();
  // BeginShutdown, then waits until every generation has called on_done. Idempotent.
  void Shutdown();

 private:
  friend class DispatchRun;
  void Forget(DispatchRun* run);

  WorkerRouter& router_;
  WorkerChannels& channels_;
  const DispatchOptions options_;
  const std::function<void()> on_retry_;
  absl::Mutex mu_;
  absl::flat_hash_map<DispatchRun*, std::weak_ptr<DispatchRun>> runs_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_GENERATION_DISPATCHER_H_
