#ifndef LLMC_TOOLS_BENCH_BENCH_METRICS_H_
#define LLMC_TOOLS_BENCH_BENCH_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench_config.h"

namespace llmc::bench {

// What the client saw of one request. Times in seconds; `start_s` from the start of the run.
struct RequestResult {
  bool success = false;
  std::string error_kind;  // short class of failure ("HTTP 429", "timeout", ...), empty on success
  std::string error;       // the details
  int http_status = 0;
  double start_s = 0;
  double ttft_s = 0;           // sending the request → the first chunk with generated text
  double latency_s = 0;        // sending the request → the end of the response
  std::vector<double> itl_s;   // gaps between successive chunks with generated text
  int64_t output_tokens = 0;   // usage.completion_tokens when the server reported it, else content chunks
  int64_t content_chunks = 0;  // chunks that carried generated text
  bool usage_reported = false;
  int64_t prompt_tokens = 0;    // usage.prompt_tokens when reported, else the dataset's estimate
  int64_t cached_tokens = 0;    // usage.prompt_tokens_details.cached_tokens: prompt tokens the server had cached
  std::string generated_text;   // multi-turn runs: the answer, which the conversation's next turn sends back
  int64_t expected_output = 0;  // max_tokens asked for
  int64_t generated_chars = 0;  // bytes of generated text
};

// Time per output token after the first: (latency − TTFT) / (output tokens − 1); none for ≤ 1 token.
std::optional<double> TimePerOutputToken(const RequestResult& result);

// Whether a successful request meets every given objective (a request with one token has TPOT 0, as in
// vLLM's benchmark).
bool MeetsObjectives(const RequestResult& result, const GoodputObjectives& objectives);

// Percentile `p` (0..100) of sorted values with linear interpolation between closest ranks (numpy's
// default); 0 for no values.
double Percentile(const std::vector<double>& sorted, double p);

// Summary of a set of latencies, in milliseconds.
struct LatencyStats {
  int64_t count = 0;
  double mean = 0;
  double std = 0;  // population standard deviation
  double median = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
};

LatencyStats Summarize(std::vector<double> values_ms);

struct ErrorSummary {
  int64_t count = 0;
  std::string example;  // the first message of this kind
};

struct BenchMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_cached_tokens = 0;  // of which the server reported cached (its prefix cache)
  int64_t total_output_tokens = 0;
  int64_t usage_reported = 0;             // completed requests whose token counts came from the server's usage
  double request_throughput = 0;          // completed requests / duration
  double output_throughput = 0;           // output tokens of completed requests / duration
  double total_token_throughput = 0;      // (input + output tokens) / duration
  std::optional<double> request_goodput;  // requests meeting the objectives / duration (with --goodput)
  int64_t good_requests = 0;
  LatencyStats ttft_ms;
  LatencyStats tpot_ms;  // over requests with more than one output token
  LatencyStats itl_ms;   // over every gap of every request
  LatencyStats e2el_ms;
  std::map<std::string, ErrorSummary> errors;  // by error_kind
};

// Aggregates completed requests (failed ones are only counted and classified) over a run of `duration_s`.
BenchMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s,
                            const GoodputObjectives& objectives);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_BENCH_METRICS_H_
