#ifndef LLMC_TOOLS_SIM_SIMULATION_H_
#define LLMC_TOOLS_SIM_SIMULATION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dispatch/dispatch_policy.h"
#include "tools/sim/sim_models.h"

namespace llmc::sim {

struct SimConfig {
  int64_t workers = 1000;
  double load = 0.8;  // offered requests ÷ CapacityRequestsPerSecond
  // Simulated time. Measured: the requests that arrive after warmup_s and at least drain_s before the end,
  // so each has had time to be answered.
  double duration_s = 4.0;
  double warmup_s = 1.5;
  double drain_s = 0.5;
  double heartbeat_s = 0.2;  // how often the dispatcher's view of the workers' queues is refreshed
  uint64_t seed = 1;
  dispatch::PrefixAwareWeights weights;  // for prefix_aware
  StepModel step;
  WorkerLimits limits;
  Workload workload;
};

// What one policy did at one load, over the requests that arrived after the warm-up.
struct SimResult {
  double request_rate = 0;  // offered, requests per second
  int64_t measured = 0;     // requests that arrived after the warm-up
  int64_t unanswered = 0;   // of which still without a first token at the end
  double ttft_p50_ms = 0, ttft_p99_ms = 0;
  double tpot_p50_ms = 0, tpot_p99_ms = 0;
  double e2e_p50_ms = 0, e2e_p99_ms = 0;
  double output_tokens_per_s = 0;
  double cached_fraction = 0;  // prompt tokens the workers' prefix caches held
};

// Requests per second the workers sustain without any prefix caching: each request's prefill at the step
// model's per-token cost, and its output at a full batch's cost per token.
double CapacityRequestsPerSecond(const SimConfig& config);

// A discrete-event simulation of the cluster: conversations arrive, each turn is dispatched by the
// controller's own `policy` (dispatch/dispatch_policy.h) on a view of the workers refreshed every
// heartbeat (and its own pick counts, as the registry keeps them), and runs on a SimWorker. INVALID_ARGUMENT
// for an unknown policy.
absl::StatusOr<SimResult> Simulate(const SimConfig& config, const std::string& policy);

}  // namespace llmc::sim

#endif  // LLMC_TOOLS_SIM_SIMULATION_H_
