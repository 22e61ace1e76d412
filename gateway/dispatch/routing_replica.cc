#include "gateway/dispatch/routing_replica.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/prefix_hash.h"

namespace llmc::gateway {

RoutingReplica::RoutingReplica(uint64_t gateway_id, uint64_t seed, const Clock& clock)
    : gateway_id_(gateway_id), seed_(seed), clock_(clock) {
  pending_.set_gateway_id(gateway_id);
}

bool RoutingReplica::has_table() const {
  absl::MutexLock lock(&mu_);
  return has_table_;
}

std::string RoutingReplica::policy_name() const {
  absl::MutexLock lock(&mu_);
  return policy_ == nullptr ? std::string() : std::string(policy_->name());
}

bool RoutingReplica::Upsert(const v1::WorkerInfo& info, absl::Time now) {
  auto it = workers_.find(info.worker_id());
  const bool known = it != workers_.end() && it->second.registration == info.registration();
  // A new registration is a restarted worker: what the policy learned about the old one is void.
  if (it != workers_.end() && !known) policy_->Forget(info.worker_id());
  const bool moved = it == workers_.end() || it->second.address != info.address();
  auto failed = failed_picks_.find(info.worker_id());
  if (failed != failed_picks_.end() && (!known || failed->second.heartbeats != info.heartbeats())) {
    failed_picks_.erase(failed);  // its new load report includes them
  }
  workers_.insert_or_assign(info.worker_id(), dispatch::FromWorkerInfo(info, now));
  controller_picks_[info.worker_id()] = info.picks_since_heartbeat();
  return moved;
}

void RoutingReplica::ClearTable() {
  has_table_ = false;
  policy_.reset();
  settings_.clear();
  workers_.clear();
  controller_picks_.clear();
  failed_picks_.clear();
}

void RoutingReplica::Remove(const std::string& worker_id) {
  if (workers_.erase(worker_id) == 0) return;
  policy_->Forget(worker_id);
  controller_picks_.erase(worker_id);
  failed_picks_.erase(worker_id);
}

void RoutingReplica::Recount(const std::string& worker_id) {
  const auto worker = workers_.find(worker_id);
  if (worker == workers_.end()) return;
  const auto local = local_counts_.find(worker_id);
  const auto failed = failed_picks_.find(worker_id);
  worker->second.picks_since_heartbeat = controller_picks_[worker_id] +
                                         (local == local_counts_.end() ? 0 : local->second) +
                                         (failed == failed_picks_.end() ? 0 : failed->second.count);
}

template <typename Predicate>
void RoutingReplica::DropLocalPicks(Predicate drop, absl::flat_hash_set<std::string>& touched) {
  std::deque<LocalPick> kept;
  for (LocalPick& pick : local_picks_) {
    if (!drop(pick)) {
      kept.push_back(std::move(pick));
      continue;
    }
    auto it = local_counts_.find(pick.worker_id);
    if (it != local_counts_.end() && --it->second == 0) local_counts_.erase(it);
    touched.insert(std::move(pick.worker_id));
  }
  local_picks_ = std::move(kept);
}

bool RoutingReplica::Apply(const v1::RoutingUpdate& update) {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  if (!update.full() && !has_table_) return false;
  controller_warming_ = update.warming();
  if (update.full()) {
    const std::string settings = update.settings().SerializeAsString();
    if (policy_ == nullptr || settings != settings_) {
      absl::StatusOr<std::unique_ptr<dispatch::DispatchPolicy>> policy =
          dispatch::MakeDispatchPolicy(update.settings(), seed_);
      if (!policy.ok()) {
        // A controller newer than this gateway may name a policy it does not know.
        LLMC_LOG(Warning) << "routing table not used: " << policy.status().message();
        ClearTable();
        return true;
      }
      policy_ = std::move(policy).value();
      settings_ = settings;
      workers_.clear();
      controller_picks_.clear();
    }
    // A warming controller (just restarted) lists only the workers that re-registered so far: the others
    // are kept until a table that is not warming leaves them out.
    if (!update.warming()) {
      absl::flat_hash_set<std::string> listed;
      for (const v1::WorkerInfo& info : update.workers()) listed.insert(info.worker_id());
      std::vector<std::string> gone;
      for (const auto& [id, worker] : workers_) {
        if (!listed.contains(id)) gone.push_back(id);
      }
      for (const std::string& id : gone) Remove(id);
    }
    has_table_ = true;
  }
  bool moved = update.full() || !update.removed_worker_ids().empty();
  // The workers whose count may have changed: recounted at the end, not the whole table.
  absl::flat_hash_set<std::string> touched;
  for (const v1::WorkerInfo& info : update.workers()) {
    moved = Upsert(info, now) || moved;
    touched.insert(info.worker_id());
  }
  for (const std::string& id : update.removed_worker_ids()) Remove(id);
  for (const v1::ReportedPick& pick : update.remote_picks()) {
    const auto it = workers_.find(pick.worker_id());
    if (it == workers_.end()) continue;
    const auto& hashes = pick.prefix_hashes();
    policy_->Record(it->second, dispatch::PickRequest{absl::MakeConstSpan(hashes.data(), hashes.size()), now});
  }
  // Picks the controller has applied are in its counts now. After a full table (a new stream, perhaps a
  // restarted controller) the answered reports are either in it or lost with the old controller.
  const uint64_t applied = update.applied_report_seq();
  const bool full = update.full();
  if (full) {
    for (const auto& [id, failed] : failed_picks_) touched.insert(id);
    failed_picks_.clear();
  }
  DropLocalPicks([&](const LocalPick& pick) { return pick.seq <= applied || (full && pick.acked); }, touched);
  for (const std::string& id : touched) Recount(id);
  return moved;
}

absl::StatusOr<PickedWorker> RoutingReplica::Pick(const std::string& model,
                                                  const std::vector<std::string>& exclude_worker_ids,
                                                  const std::vector<uint64_t>& prefix_hashes) {
  absl::MutexLock lock(&mu_);
  if (!has_table_) return absl::UnavailableError("no routing table yet");
  // The controller expires silent workers and says so; the copy trusts it.
  const auto is_live = [](const dispatch::RegisteredWorker&) { return true; };
  const auto is_excluded = [&](absl::string_view id) {
    return std::find(exclude_worker_ids.begin(), exclude_worker_ids.end(), id) != exclude_worker_ids.end();
  };
  const size_t num_hashes = std::min(prefix_hashes.size(), kMaxPrefixChunks);
  const absl::Span<const uint64_t> hashes(prefix_hashes.data(), num_hashes);
  absl::StatusOr<dispatch::RegisteredWorker*> chosen =
      dispatch::PickWorker(workers_, model, {is_live, is_excluded}, *policy_, {hashes, clock_.Now()});
  if (!chosen.ok()) {
    // As the warming controller answers (worker_registry.cc): its workers may not all be back yet.
    if (absl::IsNotFound(chosen.status()) && controller_warming_) {
      return absl::UnavailableError(absl::StrCat(chosen.status().message(),
                                                 " yet: the controller started moments ago and workers may "
                                                 "still be registering"));
    }
    return chosen.status();
  }
  const dispatch::RegisteredWorker& worker = **chosen;
  local_picks_.push_back({next_seq_, worker.worker_id});
  ++local_counts_[worker.worker_id];
  v1::ReportedPick& reported = *pending_.add_picks();
  reported.set_worker_id(worker.worker_id);
  reported.set_model(model);
  reported.mutable_prefix_hashes()->Add(hashes.begin(), hashes.end());
  return PickedWorker{worker.worker_id, worker.address};
}

std::optional<v1::ReportPicksRequest> RoutingReplica::TakeReport() {
  absl::MutexLock lock(&mu_);
  if (pending_.picks().empty()) return std::nullopt;
  v1::ReportPicksRequest report = std::move(pending_);
  report.set_seq(next_seq_++);
  pending_ = v1::ReportPicksRequest();
  pending_.set_gateway_id(gateway_id_);
  const int excess = report.picks_size() - dispatch::kMaxPicksPerReport;
  if (excess > 0) {
    // The newest picks wait for the next report: renumber them.
    for (int i = dispatch::kMaxPicksPerReport; i < report.picks_size(); ++i) {
      *pending_.add_picks() = std::move(*report.mutable_picks(i));
    }
    report.mutable_picks()->DeleteSubrange(dispatch::kMaxPicksPerReport, excess);
    for (auto it = local_picks_.rbegin(), end = it + excess; it != end; ++it) it->seq = next_seq_;
  }
  return report;
}

size_t RoutingReplica::num_local_picks() const {
  absl::MutexLock lock(&mu_);
  size_t count = local_picks_.size();
  for (const auto& [id, failed] : failed_picks_) count += failed.count;
  return count;
}

void RoutingReplica::ReportDone(uint64_t seq, bool applied) {
  absl::MutexLock lock(&mu_);
  if (applied) {
    for (LocalPick& pick : local_picks_) {
      if (pick.seq == seq) pick.acked = true;
    }
    return;
  }
  // Kept as a count per worker: while the controller is away, reports fail as fast as picks are made. A
  // worker's total does not change (its picks move from one count to the other).
  absl::flat_hash_set<std::string> moved_to_failed;
  const auto failed_report = [&](const LocalPick& pick) {
    if (pick.seq != seq) return false;
    const auto worker = workers_.find(pick.worker_id);
    if (worker != workers_.end()) {
      FailedPicks& failed = failed_picks_[pick.worker_id];
      failed.heartbeats = worker->second.heartbeats;
      ++failed.count;
    }
    return true;
  };
  DropLocalPicks(failed_report, moved_to_failed);
}

std::vector<v1::WorkerInfo> RoutingReplica::Workers() const {
  const absl::Time now = clock_.Now();
  std::vector<v1::WorkerInfo> result;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, worker] : workers_) result.push_back(dispatch::ToWorkerInfo(worker, now));
  std::sort(result.begin(), result.end(),
            [](const v1::WorkerInfo& a, const v1::WorkerInfo& b) { return a.worker_id() < b.worker_id(); });
  return result;
}

}  // namespace llmc::gateway
