#include "tools/batch/batch_cli.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/config_field.h"
#include "common/config/config_loader.h"
#include "tools/batch/batch_config.h"
#include "tools/batch/batch_runner.h"
#include "tools/bench/bench_config.h"
#include "worker/engine/engine.h"
#include "worker/service/served_model.h"

namespace llmc::batch {
namespace {

constexpr int kExitUnusable = 1;
constexpr int kExitBadFlags = 2;

// The CPU's model name, for the summary (benchmark figures name the machine).
std::string MachineName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      return std::string(absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
    }
  }
  return "unknown CPU";
}

struct LoadedEngine {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<engine::Engine> engine;
  worker::ServedModel served;
};

absl::StatusOr<LoadedEngine> LoadEngine(const BatchConfig& config) {
  LoadedEngine loaded;
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tokenizer =
      tokenizer::Tokenizer::FromFile(config.model_path + "/tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status();
  loaded.tokenizer = *std::move(tokenizer);
  absl::StatusOr<std::unique_ptr<model::LoadedModel>> model =
      model::LoadedModel::Load(config.model_path, {config.device, config.dtype, config.quantization, 0});
  if (!model.ok()) return model.status();
  engine::EngineOptions options;
  options.kv_cache_bytes = config.kv_cache_bytes;
  options.kv_cache_memory_fraction = config.kv_cache_memory_fraction;
  options.max_running = config.max_running;
  options.max_num_batched_tokens = config.max_num_batched_tokens;
  options.max_waiting = 4 * config.max_running;
  options.max_model_len = config.max_model_len;
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(*std::move(model), *loaded.tokenizer, options);
  if (!engine.ok()) return engine.status();
  loaded.engine = *std::move(engine);
  loaded.served = worker::MakeServedModel(*loaded.engine, *loaded.tokenizer, "");
  if (absl::Status status =
          worker::LoadPackageChatTemplate(config.model_path, loaded.engine->manifest(), loaded.served);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = loaded.engine->Start(); !status.ok()) return status;
  return loaded;
}

}  // namespace

int BatchMain(const std::vector<std::string>& raw_args, std::ostream& out, std::ostream& err) {
  BatchConfig config;
  std::vector<config::ConfigField> fields = config::CollectConfigFields(config);
  const config::ProgramInfo program{"llmc-batch", "batch",
                                    "offline generation: an OpenAI batch file or prompts through the engine"};
  auto loaded = config::LoadConfigFromArgs(
      program, bench::NormalizeFlagArgs(raw_args), fields, [&config] { return config.Validate(); }, out);
  if (!loaded.ok()) {
    err << "llmc-batch: " << loaded.status().message() << "\n";
    return kExitBadFlags;
  }
  if (*loaded == config::ConfigOutcome::kExit) return 0;

  std::ifstream input_file;
  if (config.input != "-") {
    input_file.open(config.input);
    if (!input_file) {
      err << "llmc-batch: cannot read " << config.input << "\n";
      return kExitUnusable;
    }
  }
  std::istream& input = config.input == "-" ? std::cin : input_file;
  std::ofstream output_file;
  if (config.output != "-") {
    output_file.open(config.output, std::ios::trunc);
    if (!output_file) {
      err << "llmc-batch: cannot write " << config.output << "\n";
      return kExitUnusable;
    }
  }
  std::ostream& output = config.output == "-" ? out : output_file;

  // libtorch's own default counts physical cores (1 on a 2-vCPU machine); a batch job wants every core.
  const unsigned all_cores = std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(config.num_threads > 0 ? static_cast<int>(config.num_threads) : static_cast<int>(all_cores));
  absl::StatusOr<LoadedEngine> engine = LoadEngine(config);
  if (!engine.ok()) {
    err << "llmc-batch: cannot load " << config.model_path << ": " << engine.status().message() << "\n";
    return kExitUnusable;
  }
  const bool show_progress = config.progress;
  BatchRunner runner(*engine->engine, engine->served, 4 * config.max_running, output, show_progress ? &err : nullptr);
  std::string line;
  int64_t line_number = 0;
  std::optional<bool> openai_format;
  if (config.input_format != "auto") openai_format = config.input_format == "openai";
  while (std::getline(input, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (!openai_format.has_value()) openai_format = LooksLikeOpenAiBatch(line);
    runner.Add(*openai_format
                   ? ParseOpenAiBatchLine(line)
                   : PromptLine(line, line_number, engine->served.name(), config.max_tokens, config.temperature));
  }
  const BatchSummary summary = runner.Finish();
  engine->engine->Stop();
  output.flush();
  if (!output) {
    err << "llmc-batch: writing " << config.output << " failed\n";
    return kExitUnusable;
  }
  const double seconds = absl::ToDoubleSeconds(summary.elapsed);
  err << absl::StrFormat(
      "llmc-batch: %d requests (%d answered with an error) in %.1f s on %s: %d prompt tokens, %d generated tokens, "
      "%.1f generated tokens/s\n",
      summary.requests, summary.failed, seconds, MachineName(), summary.prompt_tokens, summary.completion_tokens,
      seconds > 0 ? summary.completion_tokens / seconds : 0.0);
  return 0;
}

}  // namespace llmc::batch
