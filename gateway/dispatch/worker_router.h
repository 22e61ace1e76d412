#ifndef LLMC_GATEWAY_DISPATCH_WORKER_ROUTER_H_
#define LLMC_GATEWAY_DISPATCH_WORKER_ROUTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/internal_auth/cluster_credentials.h"
#include "gateway/dispatch/routing_replica.h"
#include "llmc/v1/controller.grpc.pb.h"

namespace llmc::gateway {

// A Pick in flight. Cancel makes its callback run soon with CANCELLED (unless the answer came first).
class PendingPick {
 public:
  virtual ~PendingPick() = default;
  virtual void Cancel() = 0;
};

// Where requests go. A thread watches the controller's routing table (WatchRouting) into a RoutingReplica,
// and Pick chooses from it at once, with the controller's policy; the picks are reported to the controller
// in the background, one ReportPicks in flight at a time (what gathers meanwhile goes in the next). Before
// the first table arrives, and when the table cannot place a request while the controller is reachable
// (a worker may have registered since), Pick asks the controller (PickWorker). While the controller is
// unreachable the last table answers. Pick and ListModels never block the caller: their callbacks run at
// once or on a gRPC thread. Stop cancels the calls in flight and returns only after every callback has
// run, so none runs on a destroyed router.
class WorkerRouter {
 public:
  // `on_refresh` (may be empty) runs on the watch thread with the table whenever workers leave it.
  // `retry_interval` bounds the wait before watching again after the stream broke. `controller_deadline`
  // bounds each unary call to the controller; past it the cached table answers. Calls carry `credentials`.
  WorkerRouter(const std::string& controller_address, absl::Duration retry_interval,
               std::function<void(const std::vector<v1::WorkerInfo>&)> on_refresh = {},
               absl::Duration controller_deadline = absl::Seconds(1),
               const internal_auth::ClusterCredentials& credentials = {});
  ~WorkerRouter();
  WorkerRouter(const WorkerRouter&) = delete;
  WorkerRouter& operator=(const WorkerRouter&) = delete;

  void Start();
  // Idempotent. Later calls of Pick and ListModels answer UNAVAILABLE at once.
  void Stop();

  using PickCallback = std::function<void(absl::StatusOr<PickedWorker>)>;
  // NOT_FOUND for a model no worker serves, UNAVAILABLE when none can take it now, CANCELLED after
  // PendingPick::Cancel or Stop.
  // `prefix_hashes`: the request's input (prefix_routing.h), for the controller's prefix_aware policy.
  std::shared_ptr<PendingPick> Pick(const std::string& model, const std::vector<std::string>& exclude_worker_ids,
                                    const std::vector<uint64_t>& prefix_hashes, PickCallback done);

  using ModelsCallback = std::function<void(absl::StatusOr<std::vector<v1::ModelSummary>>)>;
  void ListModels(ModelsCallback done);

  // True when the last known routing table has a ready worker.
  bool HasReadyWorker() const;
  // True while the routing table streams from the controller.
  bool watching() const { return watching_.load(); }
  // True while the controller refuses the gateway's internal credentials (its last WatchRouting ended
  // UNAUTHENTICATED or PERMISSION_DENIED): a misconfiguration only the operator can fix.
  bool refused_by_controller() const { return refused_.load(); }
  const RoutingReplica& replica() const { return replica_; }

 private:
  struct AsyncCall;
  void WatchLoop();
  // Sends the picks made since the last report, unless a report is in flight (its answer sends the next).
  void SendReport();
  // Registers a call about to start; false once stopping (the caller answers UNAVAILABLE instead).
  bool BeginCall(const std::shared_ptr<AsyncCall>& call);
  void EndCall(const std::shared_ptr<AsyncCall>& call);
  std::shared_ptr<PendingPick> AskController(const std::string& model,
                                             const std::vector<std::string>& exclude_worker_ids,
                                             const std::vector<uint64_t>& prefix_hashes, PickCallback done);
  std::vector<v1::ModelSummary> ModelsFromCache() const;

  void SetDeadline(grpc::ClientContext& context) const;

  std::unique_ptr<v1::Controller::Stub> stub_;
  const absl::Duration retry_interval_;
  const absl::Duration controller_deadline_;
  const std::function<void(const std::vector<v1::WorkerInfo>&)> on_refresh_;
  RoutingReplica replica_;
  std::atomic<bool> watching_{false};
  std::atomic<bool> refused_{false};
  absl::Notification first_table_;
  absl::Notification stop_;
  std::thread watch_thread_;
  absl::Mutex watch_mu_;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(watch_mu_) = nullptr;
  absl::Mutex report_mu_;
  bool report_in_flight_ ABSL_GUARDED_BY(report_mu_) = false;
  absl::Mutex calls_mu_;
  absl::flat_hash_set<std::shared_ptr<AsyncCall>> calls_ ABSL_GUARDED_BY(calls_mu_);
  bool stopping_ ABSL_GUARDED_BY(calls_mu_) = false;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_WORKER_ROUTER_H_
