#ifndef LLMC_TOOLS_BENCH_RESULT_JSON_H_
#define LLMC_TOOLS_BENCH_RESULT_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bench_config.h"
#include "tools/bench/bench_metrics.h"

namespace llmc::bench {

// What a run was asked to do, recorded beside its metrics.
struct RunInfo {
  std::string label;
  std::string base_url;
  std::string endpoint;
  std::string model;
  std::string dataset;  // "random" or the prompts file
  int64_t num_prompts = 0;
  int64_t input_len = 0;
  int64_t output_len = 0;
  double range_ratio = 0;
  double request_rate = 0;  // +inf: all at once
  double burstiness = 1;
  int64_t max_concurrency = 0;    // 0: no limit
  int32_t turns = 1;              // multi-turn: user messages per conversation
  int64_t shared_prefix_len = 0;  // multi-turn: words of the system prompt every conversation shares
  bool ignore_eos = false;
  double temperature = 0;
  uint64_t seed = 0;
  std::string run_id;
  GoodputObjectives goodput;
  bool hit_max_duration = false;
};

// The result file: the run's settings, every metric (latency summaries as {"count", "mean", "std",
// "median", "p50", "p90", "p99", "min", "max"} in ms), errors by kind, and with `detailed` every request.
nlohmann::json ResultsToJson(const RunInfo& info, const BenchMetrics& metrics,
                             const std::vector<RequestResult>* detailed = nullptr);

// The human-readable summary printed at the end of a run.
std::string FormatSummary(const RunInfo& info, const BenchMetrics& metrics);

absl::StatusOr<nlohmann::json> LoadResultFile(const std::string& path);
absl::Status WriteResultFile(const std::string& path, const nlohmann::json& results);

// The series a result belongs to in compare tables and plots: its label, else the file name.
std::string SeriesName(const nlohmann::json& results, const std::string& path);

// The concurrency a result was measured at: max_concurrency, or num_prompts when it was unlimited.
double ConcurrencyOf(const nlohmann::json& results);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_RESULT_JSON_H_
