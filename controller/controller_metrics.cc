#include "controller/controller_metrics.h"

#include "common/status_codes.h"

namespace llmc::controller {
namespace {

std::string ResultLabel(const absl::Status& status) {
  if (status.ok()) return "ok";
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return "not_found";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kInvalidArgument:
      return "invalid_argument";
    default:
      return "error";
  }
}

}  // namespace

ControllerMetrics::ControllerMetrics(const WorkerRegistry& registry, std::string policy)
    : registry_(registry),
      policy_(std::move(policy)),
      prometheus_(std::make_shared<prometheus::Registry>()),
      picks_(prometheus::BuildCounter()
                 .Name("llmc_controller_picks_total")
                 .Help("PickWorker calls by dispatch policy, model and result")
                 .Register(*prometheus_)),
      gateway_picks_(prometheus::BuildCounter()
                         .Name("llmc_controller_gateway_picks_total")
                         .Help("Picks gateways made from their routing tables and reported (ReportPicks), by "
                               "dispatch policy and model")
                         .Register(*prometheus_)),
      registrations_(prometheus::BuildCounter()
                         .Name("llmc_controller_registrations_total")
                         .Help("RegisterWorker calls by result")
                         .Register(*prometheus_)),
      heartbeats_(prometheus::BuildCounter()
                      .Name("llmc_controller_heartbeats_total")
                      .Help("Heartbeats by result (unknown: the worker was told to register again)")
                      .Register(*prometheus_)),
      expired_(prometheus::BuildCounter()
                   .Name("llmc_controller_workers_expired_total")
                   .Help("Workers dropped after missing heartbeats")
                   .Register(*prometheus_)
                   .Add({})),
      routing_watchers_(prometheus::BuildGauge()
                            .Name("llmc_controller_routing_watchers")
                            .Help("Gateways watching the routing table (WatchRouting streams)")
                            .Register(*prometheus_)
                            .Add({})),
      workers_(prometheus::BuildGauge()
                   .Name("llmc_controller_workers")
                   .Help("Live workers per model; state=ready counts those dispatch may pick")
                   .Register(*prometheus_)) {}

void ControllerMetrics::CountPick(absl::string_view model, const absl::Status& result) {
  // Unknown model names come from clients: keep them out of the label set so it stays bounded.
  const std::string model_label = result.code() == absl::StatusCode::kNotFound ? "" : std::string(model);
  picks_.Add({{"policy", policy_}, {"model", model_label}, {"result", ResultLabel(result)}}).Increment();
}

void ControllerMetrics::CountGatewayPicks(const absl::flat_hash_map<std::string, uint64_t>& picks_by_model) {
  for (const auto& [model, count] : picks_by_model) {
    gateway_picks_.Add({{"policy", policy_}, {"model", model}}).Increment(static_cast<double>(count));
  }
}

void ControllerMetrics::SetRoutingWatchers(size_t count) { routing_watchers_.Set(static_cast<double>(count)); }

void ControllerMetrics::CountRegistration(const absl::Status& result) {
  registrations_.Add({{"result", ResultLabel(result)}}).Increment();
}

void ControllerMetrics::CountHeartbeat(bool known) {
  heartbeats_.Add({{"result", known ? "ok" : "unknown"}}).Increment();
}

void ControllerMetrics::CountExpired(size_t count) { expired_.Increment(static_cast<double>(count)); }

void ControllerMetrics::RefreshWorkerGauges() {
  const std::vector<v1::ModelSummary> models = registry_.ListModels();
  absl::MutexLock lock(&gauges_mu_);
  for (auto& [name, gauges] : model_gauges_) {
    gauges.first->Set(0);
    gauges.second->Set(0);
  }
  for (const auto& summary : models) {
    auto [it, inserted] = model_gauges_.try_emplace(summary.info().name());
    if (inserted) {
      it->second = {&workers_.Add({{"model", summary.info().name()}, {"state", "alive"}}),
                    &workers_.Add({{"model", summary.info().name()}, {"state", "ready"}})};
    }
    it->second.first->Set(summary.num_workers());
    it->second.second->Set(summary.num_ready());
  }
}

}  // namespace llmc::controller
