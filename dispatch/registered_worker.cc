#include "dispatch/registered_worker.h"

#include <algorithm>
#include <cmath>

namespace llmc::dispatch {

bool RegisteredWorker::Serves(absl::string_view model) const {
  return std::any_of(models.begin(), models.end(), [&](const v1::ModelInfo& info) { return info.name() == model; });
}

double RegisteredWorker::Capacity() const { return std::max<double>(1.0, load.max_running()); }

double RegisteredWorker::RelativeLoad() const {
  const double queued = static_cast<double>(load.num_waiting()) + load.num_running() + picks_since_heartbeat;
  return queued / Capacity();
}

v1::WorkerLoad SanitizedLoad(v1::WorkerLoad load) {
  constexpr float kMaxPrefillTokensPerSecond = 1e9f;
  const float kv = load.kv_cache_usage();
  load.set_kv_cache_usage(std::isnan(kv) ? 1.0f : std::clamp(kv, 0.0f, 1.0f));
  const auto rate = [](float value) { return std::isfinite(value) && value > 0 ? value : 0.0f; };
  load.set_tokens_per_second(rate(load.tokens_per_second()));
  load.set_prefill_tokens_per_second(std::min(rate(load.prefill_tokens_per_second()), kMaxPrefillTokensPerSecond));
  load.set_max_running(std::min(load.max_running(), kMaxReportedCapacity));
  load.set_max_waiting(std::min(load.max_waiting(), kMaxReportedCapacity));
  return load;
}

v1::WorkerInfo ToWorkerInfo(const RegisteredWorker& worker, absl::Time now) {
  v1::WorkerInfo info;
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
  info.set_heartbeats(worker.heartbeats);
  info.set_registration(worker.registration);
  return info;
}

RegisteredWorker FromWorkerInfo(const v1::WorkerInfo& info, absl::Time now) {
  RegisteredWorker worker;
  worker.worker_id = info.worker_id();
  worker.address = info.address();
  worker.version = info.version();
  worker.models.assign(info.models().begin(), info.models().end());
  worker.load = SanitizedLoad(info.load());
  worker.state = info.state();
  worker.speed_weight = info.speed_weight() > 0 ? info.speed_weight() : 1.0;
  worker.picks_since_heartbeat = info.picks_since_heartbeat();
  worker.last_heartbeat = now - absl::Milliseconds(info.last_heartbeat_age_ms());
  worker.registered_at = now - absl::Milliseconds(info.registered_age_ms());
  worker.heartbeats = info.heartbeats();
  worker.registration = info.registration();
  return worker;
}

}  // namespace llmc::dispatch
