#include "tools/bench/bench_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace llmc::bench {

std::optional<double> TimePerOutputToken(const RequestResult& result) {
  if (result.output_tokens <= 1) return std::nullopt;
  return (result.latency_s - result.ttft_s) / static_cast<double>(result.output_tokens - 1);
}

bool MeetsObjectives(const RequestResult& result, const GoodputObjectives& objectives) {
  if (!result.success) return false;
  if (objectives.ttft_ms >= 0 && result.ttft_s * 1e3 > objectives.ttft_ms) return false;
  if (objectives.tpot_ms >= 0 && TimePerOutputToken(result).value_or(0.0) * 1e3 > objectives.tpot_ms) return false;
  if (objectives.e2el_ms >= 0 && result.latency_s * 1e3 > objectives.e2el_ms) return false;
  return true;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lower = static_cast<size_t>(std::floor(rank));
  const size_t upper = std::min(lower + 1, sorted.size() - 1);
  const double fraction = rank - static_cast<double>(lower);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction;
}

LatencyStats Summarize(std::vector<double> values_ms) {
  LatencyStats stats;
  if (values_ms.empty()) return stats;
  std::sort(values_ms.begin(), values_ms.end());
  const double n = static_cast<double>(values_ms.size());
  stats.count = static_cast<int64_t>(values_ms.size());
  stats.mean = std::accumulate(values_ms.begin(), values_ms.end(), 0.0) / n;
  double squares = 0;
  for (double v : values_ms) squares += (v - stats.mean) * (v - stats.mean);
  stats.std = std::sqrt(squares / n);
  stats.median = Percentile(values_ms, 50);
  stats.p90 = Percentile(values_ms, 90);
  stats.p99 = Percentile(values_ms, 99);
  stats.min = values_ms.front();
  stats.max = values_ms.back();
  return stats;
}

BenchMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s,
                            const GoodputObjectives& objectives) {
  BenchMetrics metrics;
  metrics.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestResult& result : results) {
    if (!result.success) {
      ++metrics.failed;
      ErrorSummary& summary = metrics.errors[result.error_kind.empty() ? "error" : result.error_kind];
      if (summary.count++ == 0) summary.example = result.error;
      continue;
    }
    ++metrics.completed;
    metrics.total_input_tokens += result.prompt_tokens;
    metrics.total_cached_tokens += result.cached_tokens;
    metrics.total_output_tokens += result.output_tokens;
    if (result.usage_reported) ++metrics.usage_reported;
    ttft.push_back(result.ttft_s * 1e3);
    e2el.push_back(result.latency_s * 1e3);
    if (auto value = TimePerOutputToken(result)) tpot.push_back(*value * 1e3);
    for (double gap : result.itl_s) itl.push_back(gap * 1e3);
    if (objectives.any() && MeetsObjectives(result, objectives)) ++metrics.good_requests;
  }
  if (duration_s > 0) {
    metrics.request_throughput = static_cast<double>(metrics.completed) / duration_s;
    metrics.output_throughput = static_cast<double>(metrics.total_output_tokens) / duration_s;
    metrics.total_token_throughput =
        static_cast<double>(metrics.total_input_tokens + metrics.total_output_tokens) / duration_s;
    if (objectives.any()) metrics.request_goodput = static_cast<double>(metrics.good_requests) / duration_s;
  } else if (objectives.any()) {
    metrics.request_goodput = 0.0;
  }
  metrics.ttft_ms = Summarize(std::move(ttft));
  metrics.tpot_ms = Summarize(std::move(tpot));
  metrics.itl_ms = Summarize(std::move(itl));
  metrics.e2el_ms = Summarize(std::move(e2el));
  return metrics;
}

}  // namespace llmc::bench
