#include "tools/sim/sim_cli.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/bench/svg_plot.h"
#include "tools/sim/simulation.h"

namespace llmc::sim {
namespace {

struct CliOptions {
  SimConfig config;
  std::vector<std::string> policies = {"lottery", "shortest_queue", "power_of_two", "prefix_aware"};
  std::vector<double> loads = {0.5, 0.7, 0.8, 0.9};
  std::string svg;
};

template <typename T>
std::function<bool(const std::string&)> Number(T& target) {
  return [&target](const std::string& text) {
    if constexpr (std::is_floating_point_v<T>) {
      double value = 0;
      if (!absl::SimpleAtod(text, &value)) return false;
      target = static_cast<T>(value);
    } else {
      int64_t value = 0;
      if (!absl::SimpleAtoi(text, &value) || value < 0) return false;
      target = static_cast<T>(value);
    }
    return true;
  };
}

std::map<std::string, std::function<bool(const std::string&)>> Flags(CliOptions& o) {
  SimConfig& c = o.config;
  return {
      {"workers", Number(c.workers)},
      {"duration_s", Number(c.duration_s)},
      {"warmup_s", Number(c.warmup_s)},
      {"drain_s", Number(c.drain_s)},
      {"heartbeat_s", Number(c.heartbeat_s)},
      {"seed", Number(c.seed)},
      {"prefix_weight", Number(c.weights.prefix)},
      {"load_weight", Number(c.weights.load)},
      {"kv_weight", Number(c.weights.kv)},
      {"queue_tokens", Number(c.weights.queue_tokens)},
      {"step_base_ms", Number(c.step.base_ms)},
      {"step_per_decode_token_ms", Number(c.step.per_decode_token_ms)},
      {"step_per_prefill_token_ms", Number(c.step.per_prefill_token_ms)},
      {"speedup", Number(c.step.speedup)},
      {"max_running", Number(c.limits.max_running)},
      {"max_num_batched_tokens", Number(c.limits.max_num_batched_tokens)},
      {"kv_blocks", Number(c.limits.kv_blocks)},
      {"block_size", Number(c.limits.block_size)},
      {"families", Number(c.workload.families)},
      {"zipf_s", Number(c.workload.zipf_s)},
      {"system_tokens", Number(c.workload.system_tokens)},
      {"turns", Number(c.workload.turns)},
      {"user_tokens", Number(c.workload.user_tokens)},
      {"output_tokens", Number(c.workload.output_tokens)},
      {"think_s", Number(c.workload.think_s)},
      {"svg", [&o](const std::string& text) { return o.svg = text, true; }},
      {"policies",
       [&o](const std::string& text) {
         o.policies = absl::StrSplit(text, ',', absl::SkipEmpty());
         return !o.policies.empty();
       }},
      {"loads",
       [&o](const std::string& text) {
         o.loads.clear();
         for (const absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
           double load = 0;
           if (!absl::SimpleAtod(part, &load) || !(load > 0)) return false;
           o.loads.push_back(load);
         }
         return !o.loads.empty();
       }},
  };
}

bool Valid(const SimConfig& c, std::ostream& err) {
  const bool ok = c.workers >= 1 && c.duration_s > c.warmup_s + c.drain_s && c.warmup_s >= 0 && c.drain_s >= 0 &&
                  c.heartbeat_s > 0 && c.step.speedup > 0 && c.limits.max_running >= 1 && c.limits.block_size >= 1 &&
                  c.limits.kv_blocks >= 1 && c.limits.max_num_batched_tokens >= c.limits.max_running &&
                  c.workload.families >= 1 && c.workload.turns >= 1 && c.workload.user_tokens >= 1 &&
                  c.workload.output_tokens >= 1 && c.workload.think_s > 0;
  if (!ok) err << "llmc-sim: inconsistent settings (see --help)\n";
  return ok;
}

}  // namespace

int RunSimCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CliOptions options;
  auto flags = Flags(options);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      out << "usage: llmc-sim [--key=value ...]; keys:";
      for (const auto& [name, parse] : flags) out << " --" << name;
      out << "\n";
      return 0;
    }
    const size_t equals = arg.find('=');
    std::string key = arg.substr(0, equals);
    if (key.rfind("--", 0) == 0) key = key.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    const auto flag = flags.find(key);
    if (equals == std::string::npos || flag == flags.end() || !flag->second(arg.substr(equals + 1))) {
      err << "llmc-sim: bad flag '" << arg << "' (expected --key=value; see --help)\n";
      return 2;
    }
  }
  if (!Valid(options.config, err)) return 2;

  const double capacity = CapacityRequestsPerSecond(options.config);
  out << absl::StrFormat(
      "llmc-sim: %d workers, capacity %.0f req/s without caching; %d families of %d-token system prompts "
      "(Zipf %.2f), %d turns of %d + %d tokens\n",
      options.config.workers, capacity, options.config.workload.families, options.config.workload.system_tokens,
      options.config.workload.zipf_s, options.config.workload.turns, options.config.workload.user_tokens,
      options.config.workload.output_tokens);
  out << absl::StrFormat("%-15s %5s %10s %12s %12s %10s %12s %8s %10s\n", "policy", "load", "req/s", "TTFT p50 ms",
                         "TTFT p99 ms", "TPOT p50", "out tok/s", "cached", "unanswered");
  std::vector<bench::PlotSeries> series;
  for (const std::string& policy : options.policies) {
    bench::PlotSeries& line = series.emplace_back();
    line.name = policy;
    for (const double load : options.loads) {
      SimConfig config = options.config;
      config.load = load;
      absl::StatusOr<SimResult> result = Simulate(config, policy);
      if (!result.ok()) {
        err << "llmc-sim: " << result.status().message() << "\n";
        return 2;
      }
      out << absl::StrFormat("%-15s %5.2f %10.0f %12.1f %12.1f %10.2f %12.0f %7.1f%% %10d\n", policy, load,
                             result->request_rate, result->ttft_p50_ms, result->ttft_p99_ms, result->tpot_p50_ms,
                             result->output_tokens_per_s, 100 * result->cached_fraction, result->unanswered);
      out.flush();
      bench::PlotPoint point;
      point.x = load * 100;
      point.output_throughput = result->output_tokens_per_s;
      point.ttft_p50 = result->ttft_p50_ms;
      point.ttft_p99 = result->ttft_p99_ms;
      point.tpot_p50 = result->tpot_p50_ms;
      point.tpot_p99 = result->tpot_p99_ms;
      point.e2el_p50 = result->e2e_p50_ms;
      point.e2el_p99 = result->e2e_p99_ms;
      line.points.push_back(point);
    }
  }
  if (!options.svg.empty()) {
    std::ofstream file(options.svg);
    file << bench::RenderSvgPlot(
        series, absl::StrFormat("llmc-sim: %d workers, dispatch policies against offered load", options.config.workers),
        "offered load (% of capacity)");
    if (!file) {
      err << "llmc-sim: cannot write " << options.svg << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace llmc::sim
