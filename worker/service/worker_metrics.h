#ifndef LLMC_WORKER_SERVICE_WORKER_METRICS_H_
#define LLMC_WORKER_SERVICE_WORKER_METRICS_H_

#include <array>
#include <memory>
#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_observer.h"

namespace llmc::worker {

// The worker's Prometheus metrics, named as vLLM names them with the `llmc:` prefix instead of `vllm:`
// (so dashboards port by renaming), each labelled with model_name. Engine events arrive through the
// EngineObserver callbacks on the engine thread; the load gauges are set from Engine::Load() before each
// scrape. prometheus-cpp metrics are thread-safe, and every child metric is created up front, so the
// engine thread never takes a family's lock.
class WorkerMetrics final : public engine::EngineObserver {
 public:
  explicit WorkerMetrics(const std::string& model_name);

  std::shared_ptr<prometheus::Registry> prometheus_registry() const { return registry_; }
  // llmc:model_info, always 1: what the worker serves, in its labels (dtype, quantization, device).
  void SetModelInfo(const std::string& dtype, const std::string& quantization, const std::string& device);
  void RefreshLoad(const engine::EngineLoad& load);

  void OnStep(const engine::StepStats& step) override;
  void OnFirstToken(absl::Duration time_to_first_token) override;
  void OnInterToken(absl::Duration inter_token_latency) override;
  void OnPreemption() override;
  void OnRequestFinished(int64_t prompt_tokens, int64_t generation_tokens, v1::FinishReason reason,
                         absl::Duration end_to_end) override;

 private:
  std::string model_name_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge& num_running_;
  prometheus::Gauge& num_waiting_;
  prometheus::Gauge& kv_cache_usage_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;
  prometheus::Counter& preemptions_;
  // Indexed by v1::FinishReason (UNSPECIFIED unused).
  std::array<prometheus::Counter*, 5> request_success_{};
  prometheus::Histogram& time_to_first_token_;
  prometheus::Histogram& inter_token_latency_;
  prometheus::Histogram& e2e_latency_;
  prometheus::Histogram& request_prompt_tokens_;
  prometheus::Histogram& request_generation_tokens_;
  prometheus::Histogram& iteration_tokens_;
  prometheus::Histogram& step_duration_;
  prometheus::Histogram& step_host_duration_;
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_WORKER_METRICS_H_
