// The worker's Prometheus metrics: vLLM's names with the llmc: prefix, fed by engine events and load.
#include "worker/service/worker_metrics.h"

#include "prometheus/text_serializer.h"
#include "tests/support/catch.h"

namespace llmc::worker {
namespace {

std::string Render(const WorkerMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.prometheus_registry()->Collect());
}

TEST_CASE("worker metrics: engine events and load appear under vLLM's names", "[unit][worker]") {
  WorkerMetrics metrics("tiny");
  engine::EngineLoad load;
  load.num_running = 3;
  load.num_waiting = 2;
  load.num_kv_blocks = 10;
  load.num_kv_blocks_used = 4;
  metrics.RefreshLoad(load);
  metrics.SetStreamQueuedBytes(4096);
  metrics.OnStep({100, 3, absl::Milliseconds(20), absl::Milliseconds(18)});
  metrics.OnFirstToken(absl::Milliseconds(50));
  metrics.OnInterToken(absl::Milliseconds(30));
  metrics.OnPreemption();
  metrics.OnRequestFinished(10, 5, v1::FINISH_REASON_STOP, absl::Seconds(1));
  metrics.OnRequestFinished(7, 2, v1::FINISH_REASON_LENGTH, absl::Seconds(2));
  metrics.OnRequestFinished(7, 0, v1::FINISH_REASON_UNSPECIFIED, absl::Seconds(2));

  const std::string text = Render(metrics);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("llmc:num_requests_running{model_name=\"tiny\"} 3"));
  CHECK_THAT(text, Catch::Contains("llmc:num_requests_waiting{model_name=\"tiny\"} 2"));
  CHECK_THAT(text, Catch::Contains("llmc:kv_cache_usage_perc{model_name=\"tiny\"} 0.4"));
  CHECK_THAT(text, Catch::Contains("llmc:stream_queued_bytes{model_name=\"tiny\"} 4096"));
  CHECK_THAT(text, Catch::Contains("llmc:prompt_tokens_total{model_name=\"tiny\"} 24"));
  CHECK_THAT(text, Catch::Contains("llmc:generation_tokens_total{model_name=\"tiny\"} 7"));
  CHECK_THAT(text, Catch::Contains("llmc:num_preemptions_total{model_name=\"tiny\"} 1"));
  CHECK_THAT(text, Catch::Contains("llmc:request_success_total{finished_reason=\"stop\",model_name=\"tiny\"} 1"));
  CHECK_THAT(text, Catch::Contains("llmc:request_success_total{finished_reason=\"length\",model_name=\"tiny\"} 1"));
  CHECK_THAT(text, Catch::Contains("llmc:request_success_total{finished_reason=\"error\",model_name=\"tiny\"} 1"));
  CHECK_THAT(text, Catch::Contains("llmc:time_to_first_token_seconds_count{model_name=\"tiny\"} 1"));
  CHECK_THAT(text, Catch::Contains("llmc:inter_token_latency_seconds_count{model_name=\"tiny\"} 1"));
  CHECK_THAT(text, Catch::Contains("llmc:e2e_request_latency_seconds_count{model_name=\"tiny\"} 3"));
  CHECK_THAT(text, Catch::Contains("llmc:iteration_tokens_total_sum{model_name=\"tiny\"} 103"));
  CHECK_THAT(text, Catch::Contains("llmc:iteration_duration_seconds_count{model_name=\"tiny\"} 1"));
  // 2 ms of the 20 ms step were outside the model: in the 0.0025 s bucket, not in the 0.001 s one.
  CHECK_THAT(text, Catch::Contains("llmc:iteration_host_duration_seconds_bucket{model_name=\"tiny\",le=\"0.001\"} 0"));
  CHECK_THAT(text, Catch::Contains("llmc:iteration_host_duration_seconds_bucket{model_name=\"tiny\",le=\"0.0025\"} 1"));
}

TEST_CASE("worker metrics: vLLM's own vllm: names, for the llm-d endpoint picker, alone or beside llmc:",
          "[unit][worker]") {
  engine::EngineLoad load;
  load.num_running = 3;
  load.num_waiting = 2;
  load.num_kv_blocks = 10;
  load.num_kv_blocks_used = 4;

  WorkerMetrics vllm_only("tiny", MetricNames::kVllm);
  vllm_only.RefreshLoad(load);
  vllm_only.SetCacheConfig(16, 10, "bfloat16");
  vllm_only.OnRequestFinished(10, 5, v1::FINISH_REASON_STOP, absl::Seconds(1));
  std::string text = Render(vllm_only);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("vllm:num_requests_running{model_name=\"tiny\"} 3"));
  CHECK_THAT(text, Catch::Contains("vllm:num_requests_waiting{model_name=\"tiny\"} 2"));
  CHECK_THAT(text, Catch::Contains("vllm:kv_cache_usage_perc{model_name=\"tiny\"} 0.4"));
  CHECK_THAT(text, Catch::Contains("vllm:gpu_cache_usage_perc{model_name=\"tiny\"} 0.4"));
  CHECK_THAT(text, Catch::Contains("vllm:cache_config_info{block_size=\"16\",cache_dtype=\"bfloat16\","
                                   "enable_prefix_caching=\"False\",num_cpu_blocks=\"0\",num_gpu_blocks=\"10\"} 1"));
  CHECK_THAT(text, Catch::Contains("vllm:e2e_request_latency_seconds_count{model_name=\"tiny\"} 1"));
  CHECK_THAT(text, Catch::Contains("vllm:time_to_first_token_seconds_bucket"));
  CHECK_THAT(text, Catch::Contains("vllm:inter_token_latency_seconds_bucket"));
  CHECK(text.find("llmc:") == std::string::npos);

  WorkerMetrics both("tiny", MetricNames::kBoth);
  both.RefreshLoad(load);
  text = Render(both);
  CHECK_THAT(text, Catch::Contains("llmc:num_requests_waiting{model_name=\"tiny\"} 2"));
  CHECK_THAT(text, Catch::Contains("vllm:num_requests_waiting{model_name=\"tiny\"} 2"));
  WorkerMetrics llmc_only("tiny", MetricNames::kLlmc);
  CHECK(Render(llmc_only).find("vllm:") == std::string::npos);

  CHECK(ParseMetricNames("both").value() == MetricNames::kBoth);
  CHECK_FALSE(ParseMetricNames("prometheus").ok());
}

}  // namespace
}  // namespace llmc::worker
