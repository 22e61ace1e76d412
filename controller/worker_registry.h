#ifndef LLMC_CONTROLLER_WORKER_REGISTRY_H_
#define LLMC_CONTROLLER_WORKER_REGISTRY_H_

#include <deque>
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
#include "dispatch/dispatch_policy.h"
#include "dispatch/registered_worker.h"
#include "llmc/v1/controller.pb.h"

namespace llmc::controller {

struct PickedWorker {
  std::string worker_id;
  std::string address;
};

enum class HeartbeatOutcome { kAccepted, kUnknownWorker };

// The controller's soft state: every live worker keyed by id, rebuilt from registrations after a restart.
// Thread-safe; every method takes the one mutex briefly and never waits on anything else (AwaitChange waits
// for the mutex's own condition).
class WorkerRegistry {
 public:
  static constexpr size_t kDefaultMaxWorkers = 1024;
  static constexpr int kMaxModelsPerWorker = 64;
  static constexpr size_t kMaxRegistrationBytes = 64 * 1024;
  static constexpr double kMaxSpeedWeight = 100;

  WorkerRegistry(const Clock& clock, absl::Duration expiry_after, std::unique_ptr<dispatch::DispatchPolicy> policy,
                 size_t max_workers = kDefaultMaxWorkers);

  // A registration belongs to the host (`peer`, internal_auth::PeerHost of the caller) that made it: while
  // it is live, only that host may register the id again, heartbeat or deregister it; others get
  // ALREADY_EXISTS (register) or PERMISSION_DENIED until it expires. Empty `peer`: in-process callers.

  // Adds a worker, or replaces the entry with the same id (a restarted worker). INVALID_ARGUMENT names
  // what is wrong: empty id, malformed address, no or too many models, duplicate or empty model names, a
  // weight outside [0, kMaxSpeedWeight], more than kMaxRegistrationBytes. RESOURCE_EXHAUSTED for a new id
  // when max_workers are registered.
  absl::Status Register(const v1::RegisterWorkerRequest& request, absl::string_view peer = {});
  absl::StatusOr<HeartbeatOutcome> Heartbeat(const v1::HeartbeatRequest& request, absl::string_view peer = {});
  // True when the worker was registered.
  absl::StatusOr<bool> Deregister(absl::string_view worker_id, absl::string_view peer = {});
  // Drops workers whose last heartbeat is older than the expiry; returns their ids.
  std::vector<std::string> ExpireSilent();

  // Chooses a ready, live worker serving `model` and not in `excluded`, and counts the pick against it.
  // NOT_FOUND when no registered worker serves the model; UNAVAILABLE when some do but none can take it,
  // and when no worker is registered at all.
  // `prefix_hashes` describe the request's input for the prefix_aware policy.
  absl::StatusOr<PickedWorker> Pick(absl::string_view model, const absl::flat_hash_set<std::string>& excluded,
                                    absl::Span<const uint64_t> prefix_hashes = {});

  // Sorted by worker id; `model` empty lists all.
  std::vector<v1::WorkerInfo> ListWorkers(absl::string_view model = "") const;
  // Sorted by model name.
  std::vector<v1::ModelSummary> ListModels() const;

  // Applies picks a gateway made from its routing table as Pick's own (counted against their workers,
  // recorded by the policy) and keeps them to relay to the other gateways. Picks of workers that left (or
  // of a model the worker does not serve) are skipped. Returns the applied picks by model.
  absl::flat_hash_map<std::string, uint64_t> ApplyReportedPicks(const v1::ReportPicksRequest& report);

  // The routing table for gateway `gateway_id`: what changed since `since_version`, or all of it (`full`)
  // when `since_version` is 0 or too old to tell. Sets `version` to what the update brings the gateway to.
  v1::RoutingUpdate Changes(uint64_t gateway_id, uint64_t since_version, uint64_t& version) const;
  // How many gateways watch the routing table (the routing feed keeps it): picks are relayed only then.
  void SetWatchers(size_t count);
  // Waits until the table's version passes `version`, or `timeout`; returns the version then.
  uint64_t AwaitChange(uint64_t version, absl::Duration timeout) const;

  // After a (re)start the registry holds only the workers that re-registered so far: for `duration` its
  // routing table says it is warming, and gateways keep the workers they knew that it does not list yet.
  void StartWarming(absl::Duration duration);
  bool warming() const;

  absl::string_view policy_name() const { return policy_->name(); }
  absl::Duration expiry_after() const { return expiry_after_; }

 private:
  // A worker's entry changed (Change) or the worker left (Removal) at `version`.
  struct Change {
    uint64_t version;
    std::string worker_id;
  };
  using Removal = Change;
  struct RelayedPick {
    uint64_t version;
    uint64_t gateway_id;
    v1::ReportedPick pick;
  };

  void MarkChanged(dispatch::RegisteredWorker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkRemoved(absl::string_view worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps a pick to relay to the gateways other than `gateway_id` (kNoGateway: the controller's own).
  void Relay(uint64_t gateway_id, v1::ReportedPick pick) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr uint64_t kNoGateway = 0;
  bool IsLive(const dispatch::RegisteredWorker& worker, absl::Time now) const;
  static bool IsDispatchable(const dispatch::RegisteredWorker& worker);

  const Clock& clock_;
  const absl::Duration expiry_after_;
  const size_t max_workers_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, dispatch::RegisteredWorker> workers_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<dispatch::DispatchPolicy> policy_ ABSL_PT_GUARDED_BY(mu_);
  // The routing feed's bookkeeping: every change bumps the version; removals and reported picks are kept
  // (bounded) so gateways can be sent what changed since the version they have.
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 1;  // 0 is "nothing yet": a gateway at 0 gets the whole table
  uint64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Change> changes_ ABSL_GUARDED_BY(mu_);              // so Changes visits what changed, not every worker
  mutable uint64_t published_version_ ABSL_GUARDED_BY(mu_) = 0;  // the last version Changes handed out
  std::deque<Removal> removals_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_version_ ABSL_GUARDED_BY(mu_) = 0;  // history before it is gone: a full update
  std::deque<RelayedPick> relayed_ ABSL_GUARDED_BY(mu_);
  size_t watchers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time warm_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  struct AppliedReports {
    uint64_t seq = 0;           // the gateway's highest report applied
    uint64_t last_version = 0;  // when it last reported, to forget the gateway silent longest
  };
  absl::flat_hash_map<uint64_t, AppliedReports> applied_reports_ ABSL_GUARDED_BY(mu_);  // by gateway id
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_WORKER_REGISTRY_H_
