#ifndef LLMC_GATEWAY_DISPATCH_WORKER_ROUTER_H_
#define LLMC_GATEWAY_DISPATCH_WORKER_ROUTER_H_

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
#include "llmc/v1/controller.grpc.pb.h"

namespace llmc::gateway {

struct PickedWorker {
  std::string worker_id;
  std::string address;
  bool from_cache = false;  // the controller was unreachable; chosen from the cached routing table
};

// A Pick in flight. Cancel makes its callback run soon with CANCELLED (unless the answer came first).
class PendingPick {
 public:
  virtual ~PendingPick() = default;
  virtual void Cancel() = 0;
};

// Where requests go: asks the controller (PickWorker) and keeps a routing table refreshed from ListWorkers
// and ListModels, used when the controller is unreachable. Pick and ListModels never block the caller:
// their callbacks run on a gRPC thread. Stop cancels the calls in flight and returns only after every
// callback has run, so none runs on a destroyed router.
class WorkerRouter {
 public:
  // `on_refresh` (may be empty) runs on the refresh thread with each new routing table.
  WorkerRouter(const std::string& controller_address, absl::Duration refresh_interval,
               std::function<void(const std::vector<v1::WorkerInfo>&)> on_refresh = {});
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

 private:
  struct AsyncCall;
  void RefreshLoop();
  void Refresh();
  // Registers a call about to start; false once stopping (the caller answers UNAVAILABLE instead).
  bool BeginCall(const std::shared_ptr<AsyncCall>& call);
  void EndCall(const std::shared_ptr<AsyncCall>& call);
  absl::StatusOr<PickedWorker> PickFromCache(const std::string& model, const std::vector<std::string>& exclude);
  std::vector<v1::ModelSummary> ModelsFromCache() const;

  std::unique_ptr<v1::Controller::Stub> stub_;
  const absl::Duration refresh_interval_;
  const std::function<void(const std::vector<v1::WorkerInfo>&)> on_refresh_;
  mutable absl::Mutex mu_;
  std::vector<v1::WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> cache_picks_ ABSL_GUARDED_BY(mu_);  // per worker since refresh
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_){std::random_device{}()};
  absl::Notification stop_;
  std::thread refresh_thread_;
  absl::Mutex calls_mu_;
  absl::flat_hash_set<std::shared_ptr<AsyncCall>> calls_ ABSL_GUARDED_BY(calls_mu_);
  bool stopping_ ABSL_GUARDED_BY(calls_mu_) = false;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_WORKER_ROUTER_H_
