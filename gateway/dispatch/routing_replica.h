#ifndef LLMC_GATEWAY_DISPATCH_ROUTING_REPLICA_H_
#define LLMC_GATEWAY_DISPATCH_ROUTING_REPLICA_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/worker_pick.h"
#include "llmc/v1/controller.pb.h"

namespace llmc::gateway {

struct PickedWorker {
  std::string worker_id;
  std::string address;
  bool from_cache = false;  // the controller was unreachable: chosen from a routing table that may be stale
};

// The gateway's copy of the controller's routing table, kept current by the WatchRouting stream. The
// gateway picks from it with the controller's own policy (dispatch/), so a request waits for no round
// trip. A pick here counts against its worker at once, as at the controller, and waits to be reported
// (TakeReport). Until an update shows the controller has applied the report, the pick is added to the
// controller's counts here, so it is counted exactly once. Thread-safe.
class RoutingReplica {
 public:
  // `seed` 0 seeds the policy from the OS. `clock` (which must outlive the replica) dates the workers'
  // heartbeats and the picks.
  RoutingReplica(uint64_t gateway_id, uint64_t seed, const Clock& clock = Clock::Real());

  // Applies one update of the stream. Changes before the first full table are ignored. A full table of a
  // warming controller (`warming`: just restarted) replaces only the workers it lists; the others stay until
  // a full table that is not warming. True when the set
  // of workers or of their addresses changed (the gateway then drops channels no worker uses).
  bool Apply(const v1::RoutingUpdate& update);
  bool has_table() const;

  // As the controller's registry picks (dispatch::PickWorker): NOT_FOUND, UNAVAILABLE, or a worker.
  absl::StatusOr<PickedWorker> Pick(const std::string& model, const std::vector<std::string>& exclude_worker_ids,
                                    const std::vector<uint64_t>& prefix_hashes);

  // The picks not yet reported (at most dispatch::kMaxPicksPerReport), as the next report; none when there
  // are none.
  std::optional<v1::ReportPicksRequest> TakeReport();
  // Report `seq` was answered: `applied` when the controller took it. Otherwise the controller never saw
  // its picks: they count here until their worker's next heartbeat shows what they became (so a burst
  // still spreads while the controller is away).
  void ReportDone(uint64_t seq, bool applied);

  // The table as the controller last described it, with this gateway's unapplied picks; sorted by id.
  std::vector<v1::WorkerInfo> Workers() const;
  std::string policy_name() const;
  uint64_t gateway_id() const { return gateway_id_; }
  // Own picks counted here that the controller's table does not show yet.
  size_t num_local_picks() const;

 private:
  struct LocalPick {
    uint64_t seq;  // the report that carries it
    std::string worker_id;
    bool acked = false;  // its report was answered OK
  };
  // Picks whose report failed, counted until the worker's next heartbeat (heartbeats != `heartbeats`).
  struct FailedPicks {
    uint64_t heartbeats = 0;
    uint32_t count = 0;
  };

  // Adds or updates a worker; true when it is new or its address changed.
  bool Upsert(const v1::WorkerInfo& info, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearTable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops local picks matching `drop`, adding their workers to `touched`.
  template <typename Predicate>
  void DropLocalPicks(Predicate drop, absl::flat_hash_set<std::string>& touched) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the worker's picks_since_heartbeat: the controller's count, its local picks and its failed ones.
  void Recount(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t gateway_id_;
  const uint64_t seed_;
  const Clock& clock_;
  mutable absl::Mutex mu_;
  bool has_table_ ABSL_GUARDED_BY(mu_) = false;
  bool controller_warming_ ABSL_GUARDED_BY(mu_) = false;  // the last update said so
  std::string settings_ ABSL_GUARDED_BY(mu_);             // the serialized DispatchSettings the policy was made from
  std::unique_ptr<dispatch::DispatchPolicy> policy_ ABSL_GUARDED_BY(mu_);
  dispatch::WorkerMap workers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint32_t> controller_picks_ ABSL_GUARDED_BY(mu_);
  std::deque<LocalPick> local_picks_ ABSL_GUARDED_BY(mu_);  // by seq; not yet in the controller's counts
  absl::flat_hash_map<std::string, uint32_t> local_counts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, FailedPicks> failed_picks_ ABSL_GUARDED_BY(mu_);
  v1::ReportPicksRequest pending_ ABSL_GUARDED_BY(mu_);  // picks for the report `next_seq_`
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_ROUTING_REPLICA_H_
