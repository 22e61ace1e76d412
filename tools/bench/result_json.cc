#include "tools/bench/result_json.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace llmc::bench {
namespace {

using nlohmann::json;

json StatsJson(const LatencyStats& stats) {
  return {{"count", stats.count},   {"mean", stats.mean},  {"std", stats.std},
          {"median", stats.median}, {"p50", stats.median}, {"p90", stats.p90},
          {"p99", stats.p99},       {"min", stats.min},    {"max", stats.max}};
}

json OptionalMs(double value) { return value >= 0 ? json(value) : json(nullptr); }

std::string Line(const std::string& name, const std::string& value) {
  return absl::StrFormat("%-40s %s\n", name + ":", value);
}

std::string Number(double value, int decimals = 2) { return absl::StrFormat("%.*f", decimals, value); }

std::string StatsBlock(const std::string& title, const std::string& name, const LatencyStats& stats) {
  const std::string middle = absl::StrCat(" ", title, " ");
  const size_t width = 51;
  const size_t left = middle.size() < width ? (width - middle.size()) / 2 : 0;
  const size_t right = middle.size() < width ? width - middle.size() - left : 0;
  std::string text = absl::StrCat(std::string(left, '-'), middle, std::string(right, '-'), "\n");
  text += Line(absl::StrCat("Mean ", name, " (ms)"), Number(stats.mean));
  text += Line(absl::StrCat("Median ", name, " (ms)"), Number(stats.median));
  text += Line(absl::StrCat("P90 ", name, " (ms)"), Number(stats.p90));
  text += Line(absl::StrCat("P99 ", name, " (ms)"), Number(stats.p99));
  return text;
}

}  // namespace

json ResultsToJson(const RunInfo& info, const BenchMetrics& metrics, const std::vector<RequestResult>* detailed) {
  json out;
  out["tool"] = "llmc-bench";
  out["date"] = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  out["label"] = info.label;
  out["base_url"] = info.base_url;
  out["endpoint"] = info.endpoint;
  out["model"] = info.model;
  out["dataset"] = info.dataset;
  out["num_prompts"] = info.num_prompts;
  out["input_len"] = info.input_len;
  out["output_len"] = info.output_len;
  out["range_ratio"] = info.range_ratio;
  out["request_rate"] = std::isfinite(info.request_rate) ? json(info.request_rate) : json("inf");
  out["burstiness"] = info.burstiness;
  out["max_concurrency"] = info.max_concurrency;
  out["ignore_eos"] = info.ignore_eos;
  out["temperature"] = info.temperature;
  out["seed"] = info.seed;
  out["run_id"] = info.run_id;
  out["hit_max_duration"] = info.hit_max_duration;

  out["duration_s"] = metrics.duration_s;
  out["completed"] = metrics.completed;
  out["failed"] = metrics.failed;
  out["total_input_tokens"] = metrics.total_input_tokens;
  out["total_cached_tokens"] = metrics.total_cached_tokens;
  out["turns"] = info.turns;
  out["shared_prefix_len"] = info.shared_prefix_len;
  out["total_output_tokens"] = metrics.total_output_tokens;
  out["usage_reported"] = metrics.usage_reported;
  out["request_throughput"] = metrics.request_throughput;
  out["output_throughput"] = metrics.output_throughput;
  out["total_token_throughput"] = metrics.total_token_throughput;
  if (info.goodput.any()) {
    out["goodput_objectives"] = {{"ttft_ms", OptionalMs(info.goodput.ttft_ms)},
                                 {"tpot_ms", OptionalMs(info.goodput.tpot_ms)},
                                 {"e2el_ms", OptionalMs(info.goodput.e2el_ms)}};
  } else {
    out["goodput_objectives"] = nullptr;
  }
  out["request_goodput"] = metrics.request_goodput ? json(*metrics.request_goodput) : json(nullptr);
  out["good_requests"] = metrics.good_requests;
  out["ttft_ms"] = StatsJson(metrics.ttft_ms);
  out["tpot_ms"] = StatsJson(metrics.tpot_ms);
  out["itl_ms"] = StatsJson(metrics.itl_ms);
  out["e2el_ms"] = StatsJson(metrics.e2el_ms);
  json errors = json::object();
  for (const auto& [kind, summary] : metrics.errors) {
    errors[kind] = {{"count", summary.count}, {"example", summary.example}};
  }
  out["errors"] = errors;
  if (detailed != nullptr) {
    json requests = json::array();
    for (const RequestResult& r : *detailed) {
      json itl = json::array();
      for (double gap : r.itl_s) itl.push_back(gap * 1e3);
      requests.push_back({{"success", r.success},
                          {"error", r.error},
                          {"http_status", r.http_status},
                          {"start_s", r.start_s},
                          {"ttft_ms", r.ttft_s * 1e3},
                          {"e2el_ms", r.latency_s * 1e3},
                          {"prompt_tokens", r.prompt_tokens},
                          {"output_tokens", r.output_tokens},
                          {"max_tokens", r.expected_output},
                          {"usage_reported", r.usage_reported},
                          {"itl_ms", itl}});
    }
    out["requests"] = requests;
  }
  return out;
}

std::string FormatSummary(const RunInfo& info, const BenchMetrics& metrics) {
  std::string text = "================ llmc-bench result ================\n";
  if (!info.label.empty()) text += Line("Label", info.label);
  text += Line("Endpoint", absl::StrCat(info.base_url, " (", info.endpoint, ")"));
  text += Line("Model", info.model);
  text += Line("Max concurrency", info.max_concurrency > 0 ? absl::StrCat(info.max_concurrency) : "unlimited");
  text += Line("Request rate (req/s)", std::isfinite(info.request_rate) ? Number(info.request_rate) : "inf");
  text += Line("Successful requests", absl::StrCat(metrics.completed));
  text += Line("Failed requests", absl::StrCat(metrics.failed));
  text += Line("Benchmark duration (s)", Number(metrics.duration_s));
  text += Line("Total input tokens", absl::StrCat(metrics.total_input_tokens));
  if (metrics.total_cached_tokens > 0 || info.turns > 1) {
    text += Line("Cached input tokens", absl::StrCat(metrics.total_cached_tokens));
    text += Line("Input tokens computed", absl::StrCat(metrics.total_input_tokens - metrics.total_cached_tokens));
  }
  text += Line("Total generated tokens", absl::StrCat(metrics.total_output_tokens));
  text += Line("Request throughput (req/s)", Number(metrics.request_throughput));
  text += Line("Output token throughput (tok/s)", Number(metrics.output_throughput));
  text += Line("Total token throughput (tok/s)", Number(metrics.total_token_throughput));
  if (metrics.request_goodput) text += Line("Request goodput (req/s)", Number(*metrics.request_goodput));
  if (metrics.completed > metrics.usage_reported) {
    text += Line("Token counts from chunks (no usage)", absl::StrCat(metrics.completed - metrics.usage_reported));
  }
  text += StatsBlock("Time to First Token", "TTFT", metrics.ttft_ms);
  text += StatsBlock("Time per Output Token (excl. 1st token)", "TPOT", metrics.tpot_ms);
  text += StatsBlock("Inter-token Latency", "ITL", metrics.itl_ms);
  text += StatsBlock("End-to-end Latency", "E2EL", metrics.e2el_ms);
  for (const auto& [kind, summary] : metrics.errors) {
    text += absl::StrCat("Error ", kind, " x", summary.count, ": ", summary.example, "\n");
  }
  if (info.hit_max_duration) text += "The run was cut short by --max_duration.\n";
  text += "===================================================\n";
  return text;
}

absl::StatusOr<json> LoadResultFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream content;
  content << in.rdbuf();
  json parsed = json::parse(content.str(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  if (!parsed.contains("output_throughput") || !parsed.contains("ttft_ms")) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an llmc-bench result file"));
  }
  return parsed;
}

absl::Status WriteResultFile(const std::string& path, const json& results) {
  std::ofstream out(path);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  out << results.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing '", path, "' failed"));
  return absl::OkStatus();
}

std::string SeriesName(const json& results, const std::string& path) {
  if (auto label = results.find("label");
      label != results.end() && label->is_string() && !label->get<std::string>().empty()) {
    return label->get<std::string>();
  }
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

double ConcurrencyOf(const json& results) {
  const double limit = results.value("max_concurrency", 0.0);
  if (limit > 0) return limit;
  return results.value("num_prompts", 0.0);
}

}  // namespace llmc::bench
