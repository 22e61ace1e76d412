#include "tools/bench/bench_cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/config/config_field.h"
#include "common/config/config_loader.h"
#include "tools/bench/arrivals.h"
#include "tools/bench/bench_metrics.h"
#include "tools/bench/compare_table.h"
#include "tools/bench/load_runner.h"
#include "tools/bench/openai_protocol.h"
#include "tools/bench/progress_bar.h"
#include "tools/bench/prompt_dataset.h"
#include "tools/bench/result_json.h"
#include "tools/bench/svg_plot.h"

namespace llmc::bench {
namespace {

using nlohmann::json;

// A numeric run id as given, else a 32-bit FNV-1a hash of the text.
uint32_t RunIdNumber(const std::string& text) {
  uint32_t number = 0;
  if (absl::SimpleAtoi(text, &number)) return number;
  uint32_t hash = 2166136261u;
  for (unsigned char c : text) hash = (hash ^ c) * 16777619u;
  return hash;
}

absl::StatusOr<std::vector<std::pair<std::string, json>>> LoadResults(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, json>> results;
  for (const std::string& path : paths) {
    auto loaded = LoadResultFile(path);
    if (!loaded.ok()) return loaded.status();
    results.emplace_back(path, *std::move(loaded));
  }
  return results;
}

int CompareMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  bool markdown = false;
  std::vector<std::string> paths;
  for (const std::string& arg : args) {
    if (arg == "--markdown") {
      markdown = true;
    } else if (arg == "--help" || arg == "-h") {
      out << "Usage: llmc-bench compare [--markdown] RESULT.json RESULT.json ...\n";
      return 0;
    } else if (absl::StartsWith(arg, "--")) {
      err << "llmc-bench compare: unknown flag " << arg << " (only --markdown)\n";
      return 2;
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.empty()) {
    err << "llmc-bench compare: give one or more result files\n";
    return 2;
  }
  auto results = LoadResults(paths);
  if (!results.ok()) {
    err << "llmc-bench compare: " << results.status().message() << "\n";
    return 1;
  }
  out << FormatTable(BuildCompareTable(*results), markdown);
  return 0;
}

int PlotMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string output;
  std::string title = "llmc-bench: throughput and latency against concurrency";
  std::vector<std::string> paths;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    auto value_of = [&](const std::string& name, std::string& target) {
      if (arg == name) {
        if (i + 1 >= args.size()) return false;
        target = args[++i];
        return true;
      }
      if (absl::StartsWith(arg, name + "=")) {
        target = arg.substr(name.size() + 1);
        return true;
      }
      return false;
    };
    if (arg == "--help" || arg == "-h") {
      out << "Usage: llmc-bench plot --output=PLOT.svg [--title=TEXT] RESULT.json ...\n"
             "Series are the results' labels (else file names); x is each result's max_concurrency.\n";
      return 0;
    }
    if (value_of("--output", output) || value_of("--title", title)) continue;
    if (absl::StartsWith(arg, "--")) {
      err << "llmc-bench plot: unknown flag " << arg << " (--output, --title)\n";
      return 2;
    }
    paths.push_back(arg);
  }
  if (output.empty() || paths.empty()) {
    err << "llmc-bench plot: needs --output=FILE.svg and one or more result files\n";
    return 2;
  }
  auto results = LoadResults(paths);
  if (!results.ok()) {
    err << "llmc-bench plot: " << results.status().message() << "\n";
    return 1;
  }
  std::ofstream file(output);
  file << RenderSvgPlot(SeriesFromResults(*results), title);
  file.close();
  if (!file) {
    err << "llmc-bench plot: cannot write '" << output << "'\n";
    return 1;
  }
  out << "wrote " << output << " (" << paths.size() << " results)\n";
  return 0;
}

int RunMain(const std::vector<std::string>& raw_args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> args = NormalizeFlagArgs(raw_args);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      out << BenchHelp();
      return 0;
    }
    if (arg == "--config" || absl::StartsWith(arg, "--config=")) {
      err << "llmc-bench: takes flags only (no --config file)\n";
      return 2;
    }
  }
  BenchConfig config;
  std::vector<config::ConfigField> fields = config::CollectConfigFields(config);
  const config::ProgramInfo program{"llmc-bench", "bench", "load generator for OpenAI-compatible endpoints"};
  auto outcome = config::LoadConfigFromArgs(
      program, args, fields, [&config] { return config.Validate(); }, out);
  if (!outcome.ok()) {
    err << "llmc-bench: " << outcome.status().message() << "\n";
    return 2;
  }
  if (*outcome == config::ConfigOutcome::kExit) return 0;
  return RunBenchmark(config, out, err);
}

}  // namespace

std::string BenchHelp() {
  BenchConfig defaults;
  std::string text =
      "llmc-bench: load generator and benchmark for OpenAI-compatible streaming endpoints\n\n"
      "Usage:\n"
      "  llmc-bench [run] [--flag=value ...]             run a benchmark, print a summary, --output-json saves it\n"
      "  llmc-bench compare [--markdown] A.json B.json ...  side-by-side table of result files\n"
      "  llmc-bench plot --output=PLOT.svg [--title=T] RESULT.json ...\n"
      "                                                   SVG of throughput and latency against concurrency\n\n"
      "Flags of run (--input-len and --input_len are the same flag; --goodput also takes vLLM's\n"
      "space-separated form, e.g. --goodput ttft:500 tpot:50):\n";
  for (const config::ConfigField& field : config::CollectConfigFields(defaults)) {
    absl::StrAppend(&text, "  --", absl::StrReplaceAll(field.key, {{"_", "-"}}), "=<", field.type_name,
                    ">  (default: ", field.format().empty() ? "\"\"" : field.format(), ")\n      ", field.help, "\n");
  }
  return text;
}

int RunBenchmark(const BenchConfig& config, std::ostream& out, std::ostream& err) {
  auto url = ParseBaseUrl(config.base_url);
  if (!url.ok()) {
    err << "llmc-bench: " << url.status().message() << "\n";
    return 2;
  }
  std::string api_key = config.api_key;
  if (api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY"); env != nullptr) api_key = env;
  }
  std::string model = config.model;
  if (model.empty()) {
    auto answer = HttpGet(*url, ModelsPath(*url), api_key, std::min(config.timeout, absl::Seconds(30)));
    if (!answer.ok()) {
      err << "llmc-bench: cannot list models: " << answer.status().message() << "\n";
      return 1;
    }
    if (answer->status != 200) {
      err << "llmc-bench: GET " << ModelsPath(*url) << " answered " << answer->status << ": "
          << ErrorMessageFromBody(answer->body) << "\n";
      return 1;
    }
    auto first = FirstModelId(answer->body);
    if (!first.ok()) {
      err << "llmc-bench: " << first.status().message() << " (give --model)\n";
      return 1;
    }
    model = *first;
  }

  std::string run_id = config.run_id;
  if (run_id.empty()) run_id = absl::StrCat(std::random_device{}());
  std::vector<BenchPrompt> prompts;
  BenchPrompt check_prompt;
  std::string system_prompt;
  if (config.prompts_file.empty()) {
    RandomDatasetOptions options;
    options.num_prompts = static_cast<int64_t>(config.num_prompts) + 1;  // the last is the check request
    options.input_len = config.input_len;
    options.output_len = config.output_len;
    options.range_ratio = config.range_ratio;
    options.seed = config.seed;
    options.run_id = RunIdNumber(run_id);
    if (config.turns > 1 || config.shared_prefix_len > 0) {
      RandomDatasetOptions all = options;
      all.num_prompts = static_cast<int64_t>(config.num_prompts) * config.turns + 1;
      check_prompt = MakeRandomPrompts(all).back();
      options.num_prompts = config.num_prompts;
      Conversations conversations =
          MakeConversations(options, static_cast<int32_t>(config.turns), config.shared_prefix_len);
      prompts = std::move(conversations.prompts);
      system_prompt = std::move(conversations.system_prompt);
    } else {
      prompts = MakeRandomPrompts(options);
      check_prompt = prompts.back();
      prompts.pop_back();
    }
  } else {
    auto loaded = LoadPromptsFile(config.prompts_file, config.num_prompts, config.output_len);
    if (!loaded.ok()) {
      err << "llmc-bench: " << loaded.status().message() << "\n";
      return 2;
    }
    prompts = *std::move(loaded);
    check_prompt = prompts.front();
  }
  const double rate = *ParseRequestRate(config.request_rate);
  const GoodputObjectives objectives = *ParseGoodput(config.goodput);
  // A conversation arrives once; its later turns follow its answers.
  const int64_t turns = static_cast<int64_t>(config.turns);
  const std::vector<double> starts =
      ArrivalTimes(static_cast<int64_t>(prompts.size()) / turns, rate, config.burstiness, config.seed);
  std::vector<double> arrivals;
  for (const double start : starts) arrivals.insert(arrivals.end(), static_cast<size_t>(turns), start);

  RunnerOptions options;
  options.url = *url;
  options.path = EndpointPath(*url, config.endpoint);
  options.model = model;
  options.api_key = api_key;
  options.chat = IsChatEndpoint(config.endpoint);
  options.ignore_eos = config.ignore_eos;
  options.temperature = config.temperature;
  options.max_concurrency = config.max_concurrency;
  options.system_prompt = system_prompt;
  options.request_timeout = config.timeout;
  options.max_duration = config.max_duration;

  err << "llmc-bench: " << prompts.size() << " requests to http://" << url->HostHeader() << options.path
      << " model=" << model << " max_concurrency="
      << (config.max_concurrency > 0 ? absl::StrCat(config.max_concurrency) : std::string("unlimited"))
      << " request_rate=" << config.request_rate << "\n";
  if (config.check_request) {
    check_prompt.output_len = std::min<int64_t>(check_prompt.output_len, 4);
    RunnerOptions check_options = options;
    check_options.max_concurrency = 1;
    auto check = RunLoad(check_options, {check_prompt}, {0.0});
    if (!check.ok()) {
      err << "llmc-bench: " << check.status().message() << "\n";
      return 1;
    }
    const RequestResult& result = check->results.front();
    if (!result.success) {
      err << "llmc-bench: the check request failed (" << result.error
          << "); fix the server or flags, or pass --check-request=false\n";
      return 1;
    }
  }

  ProgressBar progress(stderr);
  std::function<void(const RunProgress&)> on_progress;
  if (!config.disable_progress) on_progress = [&progress](const RunProgress& p) { progress.Update(p); };
  auto run = RunLoad(options, prompts, arrivals, on_progress);
  if (!config.disable_progress) progress.Finish();
  if (!run.ok()) {
    err << "llmc-bench: " << run.status().message() << "\n";
    return 1;
  }
  const BenchMetrics metrics = ComputeMetrics(run->results, run->duration_s, objectives);

  RunInfo info;
  info.label = config.label;
  info.base_url = config.base_url;
  info.endpoint = options.path;
  info.model = model;
  info.dataset = config.prompts_file.empty() ? "random" : config.prompts_file;
  info.num_prompts = static_cast<int64_t>(prompts.size());
  info.input_len = config.prompts_file.empty() ? config.input_len : 0;
  info.output_len = config.output_len;
  info.range_ratio = config.range_ratio;
  info.request_rate = rate;
  info.burstiness = config.burstiness;
  info.max_concurrency = config.max_concurrency;
  info.turns = static_cast<int32_t>(config.turns);
  info.shared_prefix_len = config.shared_prefix_len;
  info.ignore_eos = config.ignore_eos;
  info.temperature = config.temperature;
  info.seed = config.seed;
  info.run_id = run_id;
  info.goodput = objectives;
  info.hit_max_duration = run->hit_max_duration;
  out << FormatSummary(info, metrics);
  if (!config.output_json.empty()) {
    const json results = ResultsToJson(info, metrics, config.save_detailed ? &run->results : nullptr);
    if (absl::Status status = WriteResultFile(config.output_json, results); !status.ok()) {
      err << "llmc-bench: " << status.message() << "\n";
      return 1;
    }
    err << "llmc-bench: results written to " << config.output_json << "\n";
  }
  return metrics.completed > 0 ? 0 : 1;
}

int BenchMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (!args.empty()) {
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "compare") return CompareMain(rest, out, err);
    if (args[0] == "plot") return PlotMain(rest, out, err);
    if (args[0] == "run") return RunMain(rest, out, err);
    if (args[0] == "help") {
      out << BenchHelp();
      return 0;
    }
  }
  return RunMain(args, out, err);
}

}  // namespace llmc::bench
