#include "controller/worker_registry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "dispatch/worker_pick.h"

namespace llmc::controller {
namespace {

constexpr size_t kMaxIdLength = 256;
constexpr size_t kMaxKeptRemovals = 4096;
constexpr size_t kMaxKeptChanges = 1 << 16;
constexpr size_t kMaxRelayedPicks = 16384;
constexpr size_t kMaxGateways = 4096;

absl::Status ValidateWorkerId(absl::string_view worker_id) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id must not be empty");
  if (worker_id.size() > kMaxIdLength) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id longer than ", kMaxIdLength, " bytes"));
  }
  for (unsigned char c : worker_id) {
    if (c < 0x20 || c == 0x7f) return absl::InvalidArgumentError("worker_id contains control characters");
  }
  return absl::OkStatus();
}

absl::Status ValidateRegistration(const v1::RegisterWorkerRequest& request) {
  if (request.ByteSizeLong() > WorkerRegistry::kMaxRegistrationBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a registration must not exceed ", WorkerRegistry::kMaxRegistrationBytes, " bytes"));
  }
  RETURN_IF_ERROR(ValidateWorkerId(request.worker_id()));
  RETURN_IF_ERROR(Annotate(ParseHostPort(request.address()).status(), "address"));
  if (request.models().empty()) return absl::InvalidArgumentError("a worker must serve at least one model");
  if (request.models_size() > WorkerRegistry::kMaxModelsPerWorker) {
    return absl::InvalidArgumentError(
        absl::StrCat("a worker may serve at most ", WorkerRegistry::kMaxModelsPerWorker, " models"));
  }
  std::vector<absl::string_view> names;
  for (const auto& model : request.models()) {
    if (model.name().empty()) return absl::InvalidArgumentError("model name must not be empty");
    if (model.name().size() > kMaxIdLength) {
      return absl::InvalidArgumentError(absl::StrCat("model name longer than ", kMaxIdLength, " bytes"));
    }
    if (std::find(names.begin(), names.end(), model.name()) != names.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", model.name(), "' listed twice"));
    }
    names.push_back(model.name());
  }
  if (!std::isfinite(request.speed_weight()) || request.speed_weight() < 0 ||
      request.speed_weight() > WorkerRegistry::kMaxSpeedWeight) {
    return absl::InvalidArgumentError(
        absl::StrCat("speed_weight must be a number in [0, ", WorkerRegistry::kMaxSpeedWeight, "]"));
  }
  if (request.state() == v1::WORKER_STATE_UNSPECIFIED) return absl::OkStatus();
  if (!v1::WorkerState_IsValid(request.state())) return absl::InvalidArgumentError("unknown worker state");
  return absl::OkStatus();
}

}  // namespace

WorkerRegistry::WorkerRegistry(const Clock& clock, absl::Duration expiry_after,
                               std::unique_ptr<dispatch::DispatchPolicy> policy, size_t max_workers)
    : clock_(clock), expiry_after_(expiry_after), max_workers_(max_workers), policy_(std::move(policy)) {
  // Registration numbers differ from a previous controller's, so a gateway that saw a worker under the
  // old controller never mistakes a restart of it for the same registration.
  std::random_device random;
  registrations_ = (static_cast<uint64_t>(random()) << 32) | random();
}

absl::Status WorkerRegistry::Register(const v1::RegisterWorkerRequest& request, absl::string_view peer) {
  RETURN_IF_ERROR(ValidateRegistration(request));
  dispatch::RegisteredWorker worker;
  worker.worker_id = request.worker_id();
  worker.address = request.address();
  worker.version = request.version();
  worker.models.assign(request.models().begin(), request.models().end());
  worker.load = dispatch::SanitizedLoad(request.load());
  worker.state = request.state() == v1::WORKER_STATE_UNSPECIFIED ? v1::WORKER_STATE_READY : request.state();
  worker.speed_weight = request.speed_weight() > 0 ? request.speed_weight() : 1.0;
  worker.registered_at = worker.last_heartbeat = clock_.Now();
  worker.peer = std::string(peer);
  absl::MutexLock lock(&mu_);
  auto existing = workers_.find(worker.worker_id);
  if (existing != workers_.end() && existing->second.peer != peer && IsLive(existing->second, worker.registered_at)) {
    return absl::AlreadyExistsError(
        absl::StrCat("worker_id '", worker.worker_id,
                     "' is registered from another host; it can be taken over only once that "
                     "registration expires (",
                     absl::FormatDuration(expiry_after_), " without a heartbeat)"));
  }
  if (existing == workers_.end() && workers_.size() >= max_workers_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the controller already has ", max_workers_, " workers registered (max_workers)"));
  }
  // Registering again under a known id means a restarted worker, whose caches start empty.
  if (existing != workers_.end()) policy_->Forget(worker.worker_id);
  worker.registration = ++registrations_;
  MarkChanged(worker);
  workers_.insert_or_assign(worker.worker_id, std::move(worker));
  return absl::OkStatus();
}

absl::StatusOr<HeartbeatOutcome> WorkerRegistry::Heartbeat(const v1::HeartbeatRequest& request,
                                                           absl::string_view peer) {
  RETURN_IF_ERROR(ValidateWorkerId(request.worker_id()));
  if (!v1::WorkerState_IsValid(request.state())) return absl::InvalidArgumentError("unknown worker state");
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(request.worker_id());
  // A worker that has been silent past the expiry is gone even if the sweep has not run yet: it must
  // register again, exactly as if the sweep had removed it.
  if (it == workers_.end() || !IsLive(it->second, now)) {
    if (it != workers_.end()) {
      policy_->Forget(it->first);
      MarkRemoved(it->first);
      workers_.erase(it);
    }
    return HeartbeatOutcome::kUnknownWorker;
  }
  dispatch::RegisteredWorker& worker = it->second;
  if (worker.peer != peer) {
    return absl::PermissionDeniedError(
        absl::StrCat("worker_id '", worker.worker_id, "' is registered from another host"));
  }
  worker.load = dispatch::SanitizedLoad(request.load());
  if (request.state() != v1::WORKER_STATE_UNSPECIFIED) worker.state = request.state();
  worker.picks_since_heartbeat = 0;
  worker.last_heartbeat = now;
  ++worker.heartbeats;
  MarkChanged(worker);
  return HeartbeatOutcome::kAccepted;
}

absl::StatusOr<bool> WorkerRegistry::Deregister(absl::string_view worker_id, absl::string_view peer) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return false;
  if (it->second.peer != peer) {
    return absl::PermissionDeniedError(absl::StrCat("worker_id '", worker_id, "' is registered from another host"));
  }
  policy_->Forget(worker_id);
  workers_.erase(it);
  MarkRemoved(worker_id);
  return true;
}

std::vector<std::string> WorkerRegistry::ExpireSilent() {
  const absl::Time now = clock_.Now();
  std::vector<std::string> expired;
  absl::MutexLock lock(&mu_);
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (IsLive(it->second, now)) {
      ++it;
      continue;
    }
    expired.push_back(it->first);
    policy_->Forget(it->first);
    MarkRemoved(it->first);
    workers_.erase(it++);
  }
  std::sort(expired.begin(), expired.end());
  return expired;
}

absl::StatusOr<PickedWorker> WorkerRegistry::Pick(absl::string_view model,
                                                  const absl::flat_hash_set<std::string>& excluded,
                                                  absl::Span<const uint64_t> prefix_hashes) {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  const auto is_live = [&](const dispatch::RegisteredWorker& worker) { return IsLive(worker, now); };
  const auto is_excluded = [&](absl::string_view id) { return excluded.contains(id); };
  absl::StatusOr<dispatch::RegisteredWorker*> chosen =
      dispatch::PickWorker(workers_, model, {is_live, is_excluded}, *policy_, {prefix_hashes, now});
  if (!chosen.ok()) {
    // Just restarted, the registry knows only the workers that re-registered so far: the ones that serve this
    // model may be on their way, so this is retryable (a gateway's fresh routing table asks here too).
    if (absl::IsNotFound(chosen.status()) && now < warm_until_) {
      return absl::UnavailableError(absl::StrCat(chosen.status().message(),
                                                 " yet: the controller started moments ago and workers may "
                                                 "still be registering"));
    }
    return chosen.status();
  }
  MarkChanged(**chosen);
  if (watchers_ == 0) return PickedWorker{(*chosen)->worker_id, (*chosen)->address};
  // Gateways learn where the prefix went, as from each other's picks.
  v1::ReportedPick relayed;
  relayed.set_worker_id((*chosen)->worker_id);
  relayed.set_model(std::string(model));
  relayed.mutable_prefix_hashes()->Add(prefix_hashes.begin(), prefix_hashes.end());
  Relay(kNoGateway, std::move(relayed));
  return PickedWorker{(*chosen)->worker_id, (*chosen)->address};
}

void WorkerRegistry::StartWarming(absl::Duration duration) {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  warm_until_ = now + duration;
}

bool WorkerRegistry::warming() const {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  return now < warm_until_;
}

std::vector<v1::WorkerInfo> WorkerRegistry::ListWorkers(absl::string_view model) const {
  const absl::Time now = clock_.Now();
  std::vector<v1::WorkerInfo> result;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, worker] : workers_) {
    if (!model.empty() && !worker.Serves(model)) continue;
    result.push_back(dispatch::ToWorkerInfo(worker, now));
  }
  std::sort(result.begin(), result.end(),
            [](const v1::WorkerInfo& a, const v1::WorkerInfo& b) { return a.worker_id() < b.worker_id(); });
  return result;
}

std::vector<v1::ModelSummary> WorkerRegistry::ListModels() const {
  const absl::Time now = clock_.Now();
  std::map<std::string, v1::ModelSummary> by_name;
  std::map<std::string, absl::Time> info_time;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, worker] : workers_) {
    if (!IsLive(worker, now)) continue;
    for (const auto& model : worker.models) {
      v1::ModelSummary& summary = by_name[model.name()];
      summary.set_num_workers(summary.num_workers() + 1);
      if (IsDispatchable(worker)) summary.set_num_ready(summary.num_ready() + 1);
      // The most recent registration describes the model, so a rolled-out change shows up.
      auto [time_it, inserted] = info_time.try_emplace(model.name(), worker.registered_at);
      if (inserted || worker.registered_at >= time_it->second) {
        time_it->second = worker.registered_at;
        *summary.mutable_info() = model;
      }
    }
  }
  std::vector<v1::ModelSummary> result;
  for (auto& [name, summary] : by_name) result.push_back(std::move(summary));
  return result;
}

void WorkerRegistry::MarkChanged(dispatch::RegisteredWorker& worker) {
  // One entry per worker between two Changes calls is enough: every gateway's version is at most the last
  // one handed out, so a walk from it back reaches any entry made since.
  const bool logged = worker.changed_version > published_version_;
  worker.changed_version = ++version_;
  if (logged) return;
  changes_.push_back({version_, worker.worker_id});
  if (changes_.size() > kMaxKeptChanges) {
    dropped_version_ = std::max(dropped_version_, changes_.front().version);
    changes_.pop_front();
  }
}

void WorkerRegistry::MarkRemoved(absl::string_view worker_id) {
  removals_.push_back({++version_, std::string(worker_id)});
  if (removals_.size() > kMaxKeptRemovals) {
    dropped_version_ = std::max(dropped_version_, removals_.front().version);
    removals_.pop_front();
  }
}

void WorkerRegistry::Relay(uint64_t gateway_id, v1::ReportedPick pick) {
  relayed_.push_back({version_, gateway_id, std::move(pick)});
  if (relayed_.size() > kMaxRelayedPicks) relayed_.pop_front();
}

absl::flat_hash_map<std::string, uint64_t> WorkerRegistry::ApplyReportedPicks(const v1::ReportPicksRequest& report) {
  absl::flat_hash_map<std::string, uint64_t> applied_by_model;
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  for (const v1::ReportedPick& pick : report.picks()) {
    auto it = workers_.find(pick.worker_id());
    if (it == workers_.end() || !it->second.Serves(pick.model())) continue;
    dispatch::RegisteredWorker& worker = it->second;
    ++applied_by_model[pick.model()];
    ++worker.picks_since_heartbeat;
    const auto& hashes = pick.prefix_hashes();
    policy_->Record(worker, dispatch::PickRequest{absl::MakeConstSpan(hashes.data(), hashes.size()), now});
    MarkChanged(worker);
    Relay(report.gateway_id(), pick);
  }
  if (applied_reports_.size() >= kMaxGateways && !applied_reports_.contains(report.gateway_id())) {
    // The gateway silent longest is forgotten (it only counts its own picks a little longer, if it is back).
    auto oldest = applied_reports_.begin();
    for (auto it = applied_reports_.begin(); it != applied_reports_.end(); ++it) {
      if (it->second.last_version < oldest->second.last_version) oldest = it;
    }
    applied_reports_.erase(oldest);
  }
  AppliedReports& applied = applied_reports_[report.gateway_id()];
  applied.seq = std::max(applied.seq, report.seq());
  applied.last_version = version_;
  ++version_;  // the reporting gateway learns its report was applied even if every worker had left
  return applied_by_model;
}

v1::RoutingUpdate WorkerRegistry::Changes(uint64_t gateway_id, uint64_t since_version, uint64_t& version) const {
  const absl::Time now = clock_.Now();
  v1::RoutingUpdate update;
  absl::MutexLock lock(&mu_);
  version = version_;
  published_version_ = version_;
  const bool full = since_version == 0 || since_version < dropped_version_;
  update.set_full(full);
  update.set_warming(now < warm_until_);
  if (full) {
    for (const auto& [id, worker] : workers_) *update.add_workers() = dispatch::ToWorkerInfo(worker, now);
  } else {
    // Newest first: a worker changed several times is sent once, as it is now.
    absl::flat_hash_set<absl::string_view> sent;
    for (auto it = changes_.rbegin(); it != changes_.rend() && it->version > since_version; ++it) {
      const auto worker = workers_.find(it->worker_id);
      if (worker == workers_.end() || !sent.insert(worker->first).second) continue;
      *update.add_workers() = dispatch::ToWorkerInfo(worker->second, now);
    }
    for (auto it = removals_.rbegin(); it != removals_.rend() && it->version > since_version; ++it) {
      // A worker removed and registered again since is in `workers` instead.
      if (!workers_.contains(it->worker_id)) update.add_removed_worker_ids(it->worker_id);
    }
    auto first = std::partition_point(relayed_.begin(), relayed_.end(),
                                      [&](const RelayedPick& relayed) { return relayed.version <= since_version; });
    for (auto it = first; it != relayed_.end(); ++it) {
      if (it->gateway_id != gateway_id) *update.add_remote_picks() = it->pick;
    }
  }
  const auto applied = applied_reports_.find(gateway_id);
  if (applied != applied_reports_.end()) update.set_applied_report_seq(applied->second.seq);
  return update;
}

void WorkerRegistry::SetWatchers(size_t count) {
  absl::MutexLock lock(&mu_);
  watchers_ = count;
}

uint64_t WorkerRegistry::AwaitChange(uint64_t version, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  const auto changed = [this, version]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ > version; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  return version_;
}

bool WorkerRegistry::IsLive(const dispatch::RegisteredWorker& worker, absl::Time now) const {
  return now - worker.last_heartbeat <= expiry_after_;
}

bool WorkerRegistry::IsDispatchable(const dispatch::RegisteredWorker& worker) {
  return worker.state == v1::WORKER_STATE_READY;
}

}  // namespace llmc::controller
