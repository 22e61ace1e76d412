#ifndef LLMC_CONTROLLER_ROUTING_FEED_H_
#define LLMC_CONTROLLER_ROUTING_FEED_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "controller/worker_registry.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "llmc/v1/controller.pb.h"

namespace llmc::controller {

// Streams the routing table to the gateways that watch it (WatchRouting): the whole table first, then
// what changed. One thread waits for the registry to change, lets a burst of changes gather for
// `coalesce`, and hands each watch stream its next update; a stream still writing the previous one
// catches up when that write is done, so a slow gateway gets fewer, larger updates and holds no one up.
// While the registry is warming (just started) its updates say so; when warming ends each stream gets the
// whole table again, which the gateways then take as complete.
class RoutingFeed {
 public:
  RoutingFeed(WorkerRegistry& registry, v1::DispatchSettings settings, absl::Duration coalesce);
  ~RoutingFeed();
  RoutingFeed(const RoutingFeed&) = delete;
  RoutingFeed& operator=(const RoutingFeed&) = delete;

  void Start();
  // Ends every watch stream (OK) and refuses new ones; returns once none is left, or after 5 s (a gRPC
  // server's Shutdown and Wait end any stream left, before the feed is destroyed).
  void Stop();

  grpc::ServerWriteReactor<v1::RoutingUpdate>* Watch(grpc::CallbackServerContext* context,
                                                     const v1::WatchRoutingRequest* request);
  size_t num_watchers() const;

 private:
  class WatchStream;
  void Loop();
  void Remove(WatchStream* stream);

  WorkerRegistry& registry_;
  const v1::DispatchSettings settings_;
  const absl::Duration coalesce_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<WatchStream*> streams_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_ROUTING_FEED_H_
