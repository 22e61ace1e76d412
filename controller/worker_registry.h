#ifndef LLMC_CONTROLLER_WORKER_REGISTRY_H_
#define LLMC_CONTROLLER_WORKER_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/dispatch_policy.h"
#include "controller/registered_worker.h"
#include "llmc/v1/controller.pb.h"

namespace llmc::controller {

struct PickedWorker {
  std::string worker_id;
  std::string address;
};

enum class HeartbeatOutcome { kAccepted, kUnknownWorker };

// The controller's soft state: every live worker keyed by id, rebuilt from registrations after a restart.
// Thread-safe; every method takes the one mutex briefly and never waits on anything else.
class WorkerRegistry {
 public:
  WorkerRegistry(const Clock& clock, absl::Duration expiry_after, std::unique_ptr<DispatchPolicy> policy);

  // Adds a worker, or replaces the entry with the same id (a restarted worker). INVALID_ARGUMENT names
  // what is wrong: empty id, malformed address, no models, duplicate or empty model names, bad weight.
  absl::Status Register(const v1::RegisterWorkerRequest& request);
  absl::StatusOr<HeartbeatOutcome> Heartbeat(const v1::HeartbeatRequest& request);
  // True when the worker was registered.
  bool Deregister(absl::string_view worker_id);
  // Drops workers whose last heartbeat is older than the expiry; returns their ids.
  std::vector<std::string> ExpireSilent();

  // Chooses a ready, live worker serving `model` and not in `excluded`, and counts the pick against it.
  // NOT_FOUND when no registered worker serves the model; UNAVAILABLE when some do but none can take it.
  // `prefix_hashes` describe the request's input for the prefix_aware policy.
  absl::StatusOr<PickedWorker> Pick(absl::string_view model, const absl::flat_hash_set<std::string>& excluded,
                                    absl::Span<const uint64_t> prefix_hashes = {});

  // Sorted by worker id; `model` empty lists all.
  std::vector<v1::WorkerInfo> ListWorkers(absl::string_view model = "") const;
  // Sorted by model name.
  std::vector<v1::ModelSummary> ListModels() const;

  absl::string_view policy_name() const { return policy_->name(); }
  absl::Duration expiry_after() const { return expiry_after_; }

 private:
  bool IsLive(const RegisteredWorker& worker, absl::Time now) const;
  static bool IsDispatchable(const RegisteredWorker& worker);

  const Clock& clock_;
  const absl::Duration expiry_after_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, RegisteredWorker> workers_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<DispatchPolicy> policy_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_WORKER_REGISTRY_H_
