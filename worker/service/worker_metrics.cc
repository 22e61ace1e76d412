#include "worker/service/worker_metrics.h"

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
const Histogram::BucketBoundaries kStepDurationBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                          0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const char* name, const char* help,
                            const prometheus::Labels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

prometheus::Counter& AddCounter(prometheus::Registry& registry, const char* name, const char* help,
                                const prometheus::Labels& labels) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
}

Histogram& AddHistogram(prometheus::Registry& registry, const char* name, const char* help,
                        const prometheus::Labels& labels, const Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(labels, buckets);
}

}  // namespace

WorkerMetrics::WorkerMetrics(const std::string& model_name)
    : model_name_(model_name),
      registry_(std::make_shared<prometheus::Registry>()),
      num_running_(AddGauge(*registry_, "llmc:num_requests_running", "Requests in the continuous batch",
                            {{"model_name", model_name}})),
      num_waiting_(AddGauge(*registry_, "llmc:num_requests_waiting", "Requests queued, not yet running",
                            {{"model_name", model_name}})),
      kv_cache_usage_(AddGauge(*registry_, "llmc:kv_cache_usage_perc",
                               "Fraction of KV-cache blocks in use (1 means 100 percent)",
                               {{"model_name", model_name}})),
      prompt_tokens_(AddCounter(*registry_, "llmc:prompt_tokens_total", "Prompt tokens of finished requests",
                                {{"model_name", model_name}})),
      generation_tokens_(AddCounter(*registry_, "llmc:generation_tokens_total", "Generated tokens of finished requests",
                                    {{"model_name", model_name}})),
      preemptions_(AddCounter(*registry_, "llmc:num_preemptions_total",
                              "Sequences preempted (KV blocks freed, recomputed later)", {{"model_name", model_name}})),
      time_to_first_token_(AddHistogram(*registry_, "llmc:time_to_first_token_seconds",
                                        "Time from arrival to the first generated token", {{"model_name", model_name}},
                                        kTimeToFirstTokenBuckets)),
      inter_token_latency_(AddHistogram(*registry_, "llmc:inter_token_latency_seconds",
                                        "Time between consecutive tokens of one sequence", {{"model_name", model_name}},
                                        kInterTokenBuckets)),
      e2e_latency_(AddHistogram(*registry_, "llmc:e2e_request_latency_seconds",
                                "Time from arrival to the end of a request", {{"model_name", model_name}},
                                kRequestLatencyBuckets)),
      request_prompt_tokens_(AddHistogram(*registry_, "llmc:request_prompt_tokens", "Prompt tokens per request",
                                          {{"model_name", model_name}}, kTokenCountBuckets)),
      request_generation_tokens_(AddHistogram(*registry_, "llmc:request_generation_tokens",
                                              "Generated tokens per request (all choices)",
                                              {{"model_name", model_name}}, kTokenCountBuckets)),
      iteration_tokens_(AddHistogram(*registry_, "llmc:iteration_tokens_total",
                                     "Tokens (prefill and decode) processed per engine step",
                                     {{"model_name", model_name}}, kIterationTokenBuckets)),
      step_duration_(AddHistogram(*registry_, "llmc:iteration_duration_seconds", "Wall time of one engine step",
                                  {{"model_name", model_name}}, kStepDurationBuckets)),
      step_host_duration_(AddHistogram(*registry_, "llmc:iteration_host_duration_seconds",
                                       "Wall time of one engine step outside the model (scheduling, batch, "
                                       "sampling, detokenizing, queueing the output)",
                                       {{"model_name", model_name}}, kStepDurationBuckets)) {
  auto& success = prometheus::BuildCounter()
                      .Name("llmc:request_success_total")
                      .Help("Finished requests by finish reason (stop, length, abort, error)")
                      .Register(*registry_);
  const std::pair<v1::FinishReason, const char*> reasons[] = {{v1::FINISH_REASON_STOP, "stop"},
                                                              {v1::FINISH_REASON_LENGTH, "length"},
                                                              {v1::FINISH_REASON_ABORT, "abort"},
                                                              {v1::FINISH_REASON_ERROR, "error"}};
  for (const auto& [reason, label] : reasons) {
    request_success_[reason] = &success.Add({{"model_name", model_name}, {"finished_reason", label}});
  }
}

void WorkerMetrics::RefreshLoad(const engine::EngineLoad& load) {
  num_running_.Set(static_cast<double>(load.num_running));
  num_waiting_.Set(static_cast<double>(load.num_waiting));
  kv_cache_usage_.Set(load.kv_cache_usage());
}

void WorkerMetrics::OnStep(const engine::StepStats& step) {
  iteration_tokens_.Observe(static_cast<double>(step.num_prefill_tokens + step.num_decode_tokens));
  step_duration_.Observe(absl::ToDoubleSeconds(step.step_time));
  step_host_duration_.Observe(absl::ToDoubleSeconds(step.step_time - step.model_time));
}

void WorkerMetrics::OnFirstToken(absl::Duration time_to_first_token) {
  time_to_first_token_.Observe(absl::ToDoubleSeconds(time_to_first_token));
}

void WorkerMetrics::OnInterToken(absl::Duration inter_token_latency) {
  inter_token_latency_.Observe(absl::ToDoubleSeconds(inter_token_latency));
}

void WorkerMetrics::OnPreemption() { preemptions_.Increment(); }

void WorkerMetrics::OnRequestFinished(int64_t prompt_tokens, int64_t generation_tokens, v1::FinishReason reason,
                                      absl::Duration end_to_end) {
  prompt_tokens_.Increment(static_cast<double>(prompt_tokens));
  generation_tokens_.Increment(static_cast<double>(generation_tokens));
  request_prompt_tokens_.Observe(static_cast<double>(prompt_tokens));
  request_generation_tokens_.Observe(static_cast<double>(generation_tokens));
  e2e_latency_.Observe(absl::ToDoubleSeconds(end_to_end));
  // A request that ends without a reason of its own (e.g. refused mid-way) counts as an error.
  const size_t index = reason > 0 && static_cast<size_t>(reason) < request_success_.size()
                           ? static_cast<size_t>(reason)
                           : static_cast<size_t>(v1::FINISH_REASON_ERROR);
  request_success_[index]->Increment();
}

void WorkerMetrics::SetModelInfo(const std::string& dtype, const std::string& quantization, const std::string& device) {
  AddGauge(*registry_, "llmc:model_info", "The model as this worker serves it (labels); always 1",
           {{"model_name", model_name_}, {"dtype", dtype}, {"quantization", quantization}, {"device", device}})
      .Set(1);
}

}  // namespace llmc::worker
