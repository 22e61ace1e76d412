#ifndef LLMC_CONTROLLER_CONTROLLER_METRICS_H_
#define LLMC_CONTROLLER_CONTROLLER_METRICS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "controller/worker_registry.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace llmc::controller {

// The controller's Prometheus metrics. Counters are bumped by the service as events happen; the
// per-model worker gauges are recomputed from the registry at each scrape.
class ControllerMetrics {
 public:
  ControllerMetrics(const WorkerRegistry& registry, std::string policy);

  std::shared_ptr<prometheus::Registry> prometheus_registry() const { return prometheus_; }

  void CountPick(absl::string_view model, const absl::Status& result);
  // Picks a gateway reported, by model (only models their workers serve, so the label set stays bounded).
  void CountGatewayPicks(const absl::flat_hash_map<std::string, uint64_t>& picks_by_model);
  void SetRoutingWatchers(size_t count);
  void CountRegistration(const absl::Status& result);
  void CountHeartbeat(bool known);
  void CountExpired(size_t count);
  // Sets llmc_controller_workers{model,state} from the registry; called before each scrape.
  void RefreshWorkerGauges();

 private:
  const WorkerRegistry& registry_;
  const std::string policy_;
  std::shared_ptr<prometheus::Registry> prometheus_;
  prometheus::Family<prometheus::Counter>& picks_;
  prometheus::Family<prometheus::Counter>& gateway_picks_;
  prometheus::Family<prometheus::Counter>& registrations_;
  prometheus::Family<prometheus::Counter>& heartbeats_;
  prometheus::Counter& expired_;
  prometheus::Gauge& routing_watchers_;
  prometheus::Family<prometheus::Gauge>& workers_;
  absl::Mutex gauges_mu_;
  // Models seen so far, so a model whose workers all left reads 0 instead of vanishing.
  std::map<std::string, std::pair<prometheus::Gauge*, prometheus::Gauge*>> model_gauges_ ABSL_GUARDED_BY(gauges_mu_);
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_CONTROLLER_METRICS_H_
