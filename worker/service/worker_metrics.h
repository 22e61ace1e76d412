#ifndef LLMC_WORKER_SERVICE_WORKER_METRICS_H_
#define LLMC_WORKER_SERVICE_WORKER_METRICS_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_observer.h"

namespace llmc::worker {

// Which names the worker's metrics go by: `llmc:` names, vLLM's `vllm:` names (what the llm-d endpoint
// picker and vLLM dashboards read, unchanged), or both.
enum class MetricNames { kLlmc, kVllm, kBoth };
absl::StatusOr<MetricNames> ParseMetricNames(const std::string& text);

// The worker's Prometheus metrics, named as vLLM names them, with the `llmc:` prefix, the `vllm:` prefix,
// or both (the same values under two names), each labelled with model_name. Engine events arrive through
// the EngineObserver callbacks on the engine thread; the load gauges are set from Engine::Load() before
// each scrape. prometheus-cpp metrics are thread-safe, and every child metric is created up front, so the
// engine thread never takes a family's lock.
class WorkerMetrics final : public engine::EngineObserver {
 public:
  explicit WorkerMetrics(const std::string& model_name, MetricNames names = MetricNames::kBoth);

  std::shared_ptr<prometheus::Registry> prometheus_registry() const { return registry_; }
  // <prefix>model_info, always 1: what the worker serves, in its labels (dtype, quantization, device).
  void SetModelInfo(const std::string& dtype, const std::string& quantization, const std::string& device);
  // <prefix>cache_config_info, always 1: the KV cache's shape in its labels, as vLLM reports it
  // (block_size, num_gpu_blocks: the blocks of the cache, on whatever device it lives).
  void SetCacheConfig(int64_t block_size, int64_t num_blocks, const std::string& cache_dtype);
  void RefreshLoad(const engine::EngineLoad& load);
  // <prefix>stream_queued_bytes: Generate answers' bytes waiting for slow readers, over all streams.
  void SetStreamQueuedBytes(int64_t bytes);

  void OnStep(const engine::StepStats& step) override;
  void OnFirstToken(absl::Duration time_to_first_token) override;
  void OnInterToken(absl::Duration inter_token_latency) override;
  void OnPreemption() override;
  void OnGrammarMask(absl::Duration fill_time) override;
  // A structured-output constraint compiled (on the compile thread, not the engine's).
  void OnGrammarCompile(absl::Duration compile_time);
  void OnPrefixCacheLookup(int64_t queried_tokens, int64_t hit_tokens) override;
  void OnRequestFinished(int64_t prompt_tokens, int64_t generation_tokens, v1::FinishReason reason,
                         absl::Duration end_to_end) override;

 private:
  // One metric under each prefix in use.
  template <typename Metric>
  using Named = std::vector<Metric*>;

  Named<prometheus::Gauge> Gauge(const std::string& name, const char* help);
  Named<prometheus::Counter> Counter(const std::string& name, const char* help);
  Named<prometheus::Histogram> Histogram(const std::string& name, const char* help,
                                         const prometheus::Histogram::BucketBoundaries& buckets);
  void Info(const std::string& name, const char* help, const prometheus::Labels& labels);

  std::string model_name_;
  std::vector<std::string> prefixes_;
  std::shared_ptr<prometheus::Registry> registry_;
  Named<prometheus::Gauge> num_running_;
  Named<prometheus::Gauge> num_waiting_;
  Named<prometheus::Gauge> kv_cache_usage_;
  Named<prometheus::Gauge> stream_queued_bytes_;
  Named<prometheus::Gauge> legacy_cache_usage_;  // vLLM's older gpu_cache_usage_perc, which some pickers read
  Named<prometheus::Counter> prompt_tokens_;
  Named<prometheus::Counter> generation_tokens_;
  Named<prometheus::Counter> preemptions_;
  Named<prometheus::Counter> prefix_cache_queries_;
  Named<prometheus::Counter> prefix_cache_hits_;
  // Indexed by v1::FinishReason (UNSPECIFIED unused).
  std::array<Named<prometheus::Counter>, 5> request_success_{};
  Named<prometheus::Histogram> time_to_first_token_;
  Named<prometheus::Histogram> inter_token_latency_;
  Named<prometheus::Histogram> e2e_latency_;
  Named<prometheus::Histogram> request_prompt_tokens_;
  Named<prometheus::Histogram> request_generation_tokens_;
  Named<prometheus::Histogram> iteration_tokens_;
  Named<prometheus::Histogram> step_duration_;
  Named<prometheus::Histogram> grammar_compile_;
  Named<prometheus::Histogram> grammar_mask_;
  Named<prometheus::Histogram> step_host_duration_;
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_WORKER_METRICS_H_
