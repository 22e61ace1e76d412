#include "worker/service/worker_metrics.h"

#include "absl/strings/str_cat.h"
#include "prometheus/family.h"

namespace llmc::worker {
namespace {

using prometheus::Histogram;

// vLLM's buckets, so histograms compare across the two.
const Histogram::BucketBoundaries kTimeToFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                                              0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                                              20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const Histogram::BucketBoundaries kInterTokenBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                        0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const Histogram::BucketBoundaries kRequestLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,    2.5,
                                                            5.0,  10.0, 15.0, 20.0, 30.0,  40.0,   50.0,
                                                            60.0, 120,  240,  480,  960.0, 1920.0, 7680.0};
const Histogram::BucketBoundaries kTokenCountBuckets = {1,   2,    5,    10,   20,    50,    100,   200,
                                                        500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
const Histogram::BucketBoundaries kIterationTokenBuckets = {1,   8,    16,   32,   64,   128,  256,
                                                            512, 1024, 2048, 4096, 8192, 16384};
const Histogram::BucketBoundaries kGrammarCompileBuckets = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                                            0.1,    0.2,   0.5,   1.0,   2.0,  5.0};
const Histogram::BucketBoundaries kGrammarMaskBuckets = {0.000005, 0.00001, 0.00002, 0.00005, 0.0001, 0.0002,
                                                         0.0005,   0.001,   0.002,   0.005,   0.01,   0.05};
const Histogram::BucketBoundaries kStepDurationBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                          0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

}  // namespace

absl::StatusOr<MetricNames> ParseMetricNames(const std::string& text) {
  if (text == "llmc") return MetricNames::kLlmc;
  if (text == "vllm") return MetricNames::kVllm;
  if (text == "both") return MetricNames::kBoth;
  return absl::InvalidArgumentError(absl::StrCat("metric names must be llmc, vllm or both, got '", text, "'"));
}

WorkerMetrics::WorkerMetrics(const std::string& model_name, MetricNames names)
    : model_name_(model_name), registry_(std::make_shared<prometheus::Registry>()) {
  if (names != MetricNames::kVllm) prefixes_.push_back("llmc:");
  if (names != MetricNames::kLlmc) prefixes_.push_back("vllm:");
  num_running_ = Gauge("num_requests_running", "Requests in the continuous batch");
  num_waiting_ = Gauge("num_requests_waiting", "Requests queued, not yet running");
  kv_cache_usage_ = Gauge("kv_cache_usage_perc", "Fraction of KV-cache blocks in use (1 means 100 percent)");
  stream_queued_bytes_ =
      Gauge("stream_queued_bytes", "Bytes of generated answers waiting for slow readers, over all streams");
  if (names != MetricNames::kLlmc) {
    legacy_cache_usage_.push_back(&prometheus::BuildGauge()
                                       .Name("vllm:gpu_cache_usage_perc")
                                       .Help("Fraction of KV-cache blocks in use (vLLM's older name)")
                                       .Register(*registry_)
                                       .Add({{"model_name", model_name_}}));
  }
  prompt_tokens_ = Counter("prompt_tokens_total", "Prompt tokens of finished requests");
  generation_tokens_ = Counter("generation_tokens_total", "Generated tokens of finished requests");
  preemptions_ = Counter("num_preemptions_total", "Sequences preempted (KV blocks freed, recomputed later)");
  prefix_cache_queries_ = Counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache");
  prefix_cache_hits_ = Counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache");
  time_to_first_token_ = Histogram("time_to_first_token_seconds", "Time from arrival to the first generated token",
                                   kTimeToFirstTokenBuckets);
  inter_token_latency_ =
      Histogram("inter_token_latency_seconds", "Time between consecutive tokens of one sequence", kInterTokenBuckets);
  e2e_latency_ =
      Histogram("e2e_request_latency_seconds", "Time from arrival to the end of a request", kRequestLatencyBuckets);
  request_prompt_tokens_ = Histogram("request_prompt_tokens", "Prompt tokens per request", kTokenCountBuckets);
  request_generation_tokens_ =
      Histogram("request_generation_tokens", "Generated tokens per request (all choices)", kTokenCountBuckets);
  iteration_tokens_ = Histogram("iteration_tokens_total", "Tokens (prefill and decode) processed per engine step",
                                kIterationTokenBuckets);
  step_duration_ = Histogram("iteration_duration_seconds", "Wall time of one engine step", kStepDurationBuckets);
  grammar_compile_ = Histogram("grammar_compile_seconds",
                               "Time to compile a structured-output constraint (JSON Schema, regex, choice, grammar)",
                               kGrammarCompileBuckets);
  grammar_mask_ = Histogram("grammar_mask_seconds", "Time to fill one structured-output row's allowed-token mask",
                            kGrammarMaskBuckets);
  step_host_duration_ = Histogram("iteration_host_duration_seconds",
                                  "Wall time of one engine step outside the model (scheduling, batch, sampling, "
                                  "detokenizing, queueing the output)",
                                  kStepDurationBuckets);
  const std::pair<v1::FinishReason, const char*> reasons[] = {{v1::FINISH_REASON_STOP, "stop"},
                                                              {v1::FINISH_REASON_LENGTH, "length"},
                                                              {v1::FINISH_REASON_ABORT, "abort"},
                                                              {v1::FINISH_REASON_ERROR, "error"}};
  for (const std::string& prefix : prefixes_) {
    auto& success = prometheus::BuildCounter()
                        .Name(prefix + "request_success_total")
                        .Help("Finished requests by finish reason (stop, length, abort, error)")
                        .Register(*registry_);
    for (const auto& [reason, label] : reasons) {
      request_success_[reason].push_back(&success.Add({{"model_name", model_name}, {"finished_reason", label}}));
    }
  }
}

WorkerMetrics::Named<prometheus::Gauge> WorkerMetrics::Gauge(const std::string& name, const char* help) {
  Named<prometheus::Gauge> metrics;
  for (const std::string& prefix : prefixes_) {
    metrics.push_back(&prometheus::BuildGauge()
                           .Name(prefix + name)
                           .Help(help)
                           .Register(*registry_)
                           .Add({{"model_name", model_name_}}));
  }
  return metrics;
}

WorkerMetrics::Named<prometheus::Counter> WorkerMetrics::Counter(const std::string& name, const char* help) {
  Named<prometheus::Counter> metrics;
  for (const std::string& prefix : prefixes_) {
    metrics.push_back(&prometheus::BuildCounter()
                           .Name(prefix + name)
                           .Help(help)
                           .Register(*registry_)
                           .Add({{"model_name", model_name_}}));
  }
  return metrics;
}

WorkerMetrics::Named<prometheus::Histogram> WorkerMetrics::Histogram(
    const std::string& name, const char* help, const prometheus::Histogram::BucketBoundaries& buckets) {
  Named<prometheus::Histogram> metrics;
  for (const std::string& prefix : prefixes_) {
    metrics.push_back(&prometheus::BuildHistogram()
                           .Name(prefix + name)
                           .Help(help)
                           .Register(*registry_)
                           .Add({{"model_name", model_name_}}, buckets));
  }
  return metrics;
}

void WorkerMetrics::Info(const std::string& name, const char* help, const prometheus::Labels& labels) {
  for (const std::string& prefix : prefixes_) {
    prometheus::BuildGauge().Name(prefix + name).Help(help).Register(*registry_).Add(labels).Set(1);
  }
}

namespace {

template <typename Metrics>
void SetAll(const Metrics& metrics, double value) {
  for (auto* metric : metrics) metric->Set(value);
}
template <typename Metrics>
void IncrementAll(const Metrics& metrics, double value) {
  for (auto* metric : metrics) metric->Increment(value);
}
template <typename Metrics>
void ObserveAll(const Metrics& metrics, double value) {
  for (auto* metric : metrics) metric->Observe(value);
}

}  // namespace

void WorkerMetrics::RefreshLoad(const engine::EngineLoad& load) {
  SetAll(num_running_, static_cast<double>(load.num_running));
  SetAll(num_waiting_, static_cast<double>(load.num_waiting));
  SetAll(kv_cache_usage_, load.kv_cache_usage());
  SetAll(legacy_cache_usage_, load.kv_cache_usage());
}

void WorkerMetrics::SetStreamQueuedBytes(int64_t bytes) { SetAll(stream_queued_bytes_, static_cast<double>(bytes)); }

void WorkerMetrics::OnStep(const engine::StepStats& step) {
  ObserveAll(iteration_tokens_, static_cast<double>(step.num_prefill_tokens + step.num_decode_tokens));
  ObserveAll(step_duration_, absl::ToDoubleSeconds(step.step_time));
  ObserveAll(step_host_duration_, absl::ToDoubleSeconds(step.step_time - step.model_time));
}

void WorkerMetrics::OnFirstToken(absl::Duration time_to_first_token) {
  ObserveAll(time_to_first_token_, absl::ToDoubleSeconds(time_to_first_token));
}

void WorkerMetrics::OnGrammarCompile(absl::Duration compile_time) {
  for (prometheus::Histogram* metric : grammar_compile_) metric->Observe(absl::ToDoubleSeconds(compile_time));
}

void WorkerMetrics::OnGrammarMask(absl::Duration fill_time) {
  for (prometheus::Histogram* metric : grammar_mask_) metric->Observe(absl::ToDoubleSeconds(fill_time));
}

void WorkerMetrics::OnInterToken(absl::Duration inter_token_latency) {
  ObserveAll(inter_token_latency_, absl::ToDoubleSeconds(inter_token_latency));
}

void WorkerMetrics::OnPreemption() { IncrementAll(preemptions_, 1); }

void WorkerMetrics::OnPrefixCacheLookup(int64_t queried_tokens, int64_t hit_tokens) {
  IncrementAll(prefix_cache_queries_, static_cast<double>(queried_tokens));
  IncrementAll(prefix_cache_hits_, static_cast<double>(hit_tokens));
}

void WorkerMetrics::OnRequestFinished(int64_t prompt_tokens, int64_t generation_tokens, v1::FinishReason reason,
                                      absl::Duration end_to_end) {
  IncrementAll(prompt_tokens_, static_cast<double>(prompt_tokens));
  IncrementAll(generation_tokens_, static_cast<double>(generation_tokens));
  ObserveAll(request_prompt_tokens_, static_cast<double>(prompt_tokens));
  ObserveAll(request_generation_tokens_, static_cast<double>(generation_tokens));
  ObserveAll(e2e_latency_, absl::ToDoubleSeconds(end_to_end));
  // A request that ends without a reason of its own (e.g. refused mid-way) counts as an error.
  const size_t index = reason > 0 && static_cast<size_t>(reason) < request_success_.size()
                           ? static_cast<size_t>(reason)
                           : static_cast<size_t>(v1::FINISH_REASON_ERROR);
  IncrementAll(request_success_[index], 1);
}

void WorkerMetrics::SetModelInfo(const std::string& dtype, const std::string& quantization, const std::string& device) {
  Info("model_info", "The model as this worker serves it (labels); always 1",
       {{"model_name", model_name_}, {"dtype", dtype}, {"quantization", quantization}, {"device", device}});
}

void WorkerMetrics::SetCacheConfig(int64_t block_size, int64_t num_blocks, const std::string& cache_dtype) {
  Info("cache_config_info", "The KV cache's configuration (labels); always 1",
       {{"block_size", absl::StrCat(block_size)},
        {"num_gpu_blocks", absl::StrCat(num_blocks)},
        {"num_cpu_blocks", "0"},
        {"cache_dtype", cache_dtype},
        {"enable_prefix_caching", "False"}});
}

}  // namespace llmc::worker
