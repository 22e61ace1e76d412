#include "controller/worker_registry.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/status_macros.h"

namespace llmc::controller {
namespace {

constexpr size_t kMaxIdLength = 256;

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
  RETURN_IF_ERROR(ValidateWorkerId(request.worker_id()));
  RETURN_IF_ERROR(Annotate(ParseHostPort(request.address()).status(), "address"));
  if (request.models().empty()) return absl::InvalidArgumentError("a worker must serve at least one model");
  std::vector<absl::string_view> names;
  for (const auto& model : request.models()) {
    if (model.name().empty()) return absl::InvalidArgumentError("model name must not be empty");
    if (std::find(names.begin(), names.end(), model.name()) != names.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", model.name(), "' listed twice"));
    }
    names.push_back(model.name());
  }
  if (!std::isfinite(request.speed_weight()) || request.speed_weight() < 0) {
    return absl::InvalidArgumentError("speed_weight must be a finite number >= 0");
  }
  if (request.state() == v1::WORKER_STATE_UNSPECIFIED) return absl::OkStatus();
  if (!v1::WorkerState_IsValid(request.state())) return absl::InvalidArgumentError("unknown worker state");
  return absl::OkStatus();
}

}  // namespace

WorkerRegistry::WorkerRegistry(const Clock& clock, absl::Duration expiry_after, std::unique_ptr<DispatchPolicy> policy)
    : clock_(clock), expiry_after_(expiry_after), policy_(std::move(policy)) {}

absl::Status WorkerRegistry::Register(const v1::RegisterWorkerRequest& request) {
  RETURN_IF_ERROR(ValidateRegistration(request));
  RegisteredWorker worker;
  worker.worker_id = request.worker_id();
  worker.address = request.address();
  worker.version = request.version();
  worker.models.assign(request.models().begin(), request.models().end());
  worker.load = request.load();
  worker.state = request.state() == v1::WORKER_STATE_UNSPECIFIED ? v1::WORKER_STATE_READY : request.state();
  worker.speed_weight = request.speed_weight() > 0 ? request.speed_weight() : 1.0;
  worker.registered_at = worker.last_heartbeat = clock_.Now();
  absl::MutexLock lock(&mu_);
  // Registering again under a known id means a restarted worker, whose caches start empty.
  if (workers_.contains(worker.worker_id)) policy_->Forget(worker.worker_id);
  workers_.insert_or_assign(worker.worker_id, std::move(worker));
  return absl::OkStatus();
}

absl::StatusOr<HeartbeatOutcome> WorkerRegistry::Heartbeat(const v1::HeartbeatRequest& request) {
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
      workers_.erase(it);
    }
    return HeartbeatOutcome::kUnknownWorker;
  }
  RegisteredWorker& worker = it->second;
  worker.load = request.load();
  if (request.state() != v1::WORKER_STATE_UNSPECIFIED) worker.state = request.state();
  worker.picks_since_heartbeat = 0;
  worker.last_heartbeat = now;
  return HeartbeatOutcome::kAccepted;
}

bool WorkerRegistry::Deregister(absl::string_view worker_id) {
  absl::MutexLock lock(&mu_);
  policy_->Forget(worker_id);
  return workers_.erase(std::string(worker_id)) > 0;
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
  std::vector<RegisteredWorker*> candidates;
  size_t serving = 0, not_ready = 0, silent = 0, skipped = 0;
  for (auto& [id, worker] : workers_) {
    if (!worker.Serves(model)) continue;
    ++serving;
    if (!IsLive(worker, now)) {
      ++silent;
    } else if (!IsDispatchable(worker)) {
      ++not_ready;
    } else if (excluded.contains(id)) {
      ++skipped;
    } else {
      candidates.push_back(&worker);
    }
  }
  if (serving == 0) {
    std::vector<std::string> known;
    for (const auto& [id, worker] : workers_) {
      for (const auto& info : worker.models) known.push_back(info.name());
    }
    std::sort(known.begin(), known.end());
    known.erase(std::unique(known.begin(), known.end()), known.end());
    return absl::NotFoundError(absl::StrCat("model '", model, "' is not served by any worker (available: ",
                                            known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
  }
  if (candidates.empty()) {
    return absl::UnavailableError(absl::StrCat("no worker can take a request for model '", model, "' now (", not_ready,
                                               " starting or draining, ", silent, " silent, ", skipped,
                                               " already tried)"));
  }
  // Stable candidate order (by id) keeps a seeded policy's choices reproducible.
  std::sort(candidates.begin(), candidates.end(),
            [](const RegisteredWorker* a, const RegisteredWorker* b) { return a->worker_id < b->worker_id; });
  const std::vector<const RegisteredWorker*> view(candidates.begin(), candidates.end());
  RegisteredWorker* chosen = candidates[policy_->Choose(view, PickRequest{prefix_hashes})];
  ++chosen->picks_since_heartbeat;
  return PickedWorker{chosen->worker_id, chosen->address};
}

std::vector<v1::WorkerInfo> WorkerRegistry::ListWorkers(absl::string_view model) const {
  const absl::Time now = clock_.Now();
  std::vector<v1::WorkerInfo> result;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, worker] : workers_) {
    if (!model.empty() && !worker.Serves(model)) continue;
    v1::WorkerInfo& info = result.emplace_back();
    info.set_worker_id(worker.worker_id);
    info.set_address(worker.address);
    info.mutable_models()->Add(worker.models.begin(), worker.models.end());
    *info.mutable_load() = worker.load;
    info.set_state(worker.state);
    info.set_speed_weight(static_cast<float>(worker.speed_weight));
    info.set_picks_since_heartbeat(worker.picks_since_heartbeat);
    info.set_last_heartbeat_age_ms(absl::ToInt64Milliseconds(now - worker.last_heartbeat));
    info.set_registered_age_ms(absl::ToInt64Milliseconds(now - worker.registered_at));
    info.set_version(worker.version);
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

bool WorkerRegistry::IsLive(const RegisteredWorker& worker, absl::Time now) const {
  return now - worker.last_heartbeat <= expiry_after_;
}

bool WorkerRegistry::IsDispatchable(const RegisteredWorker& worker) { return worker.state == v1::WORKER_STATE_READY; }

}  // namespace llmc::controller
