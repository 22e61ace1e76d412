#ifndef LLMC_TOOLS_BATCH_BATCH_CONFIG_H_
#define LLMC_TOOLS_BATCH_BATCH_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/engine_limits.h"

namespace llmc::batch {

// The flags of llmc-batch (--max-tokens and --max_tokens are the same flag).
struct BatchConfig {
  std::string model_path;             // the model package folder
  std::string input;                  // OpenAI batch input (JSONL) or a plain prompts file; "-" reads stdin
  std::string output;                 // the batch output JSONL; "-" writes stdout
  std::string input_format = "auto";  // auto, openai or prompts
  // Plain prompts become /v1/completions requests with these settings.
  int64_t max_tokens = 256;
  double temperature = 0.0;
  // The engine, as on a worker.
  std::string device = "auto";
  std::string dtype;
  std::string quantization;
  int64_t num_threads = 0;  // 0: every hardware thread
  int64_t max_running = 64;
  int64_t max_num_batched_tokens = 1024;
  int64_t kv_cache_bytes = 0;  // 0: kv_cache_memory_fraction of available memory
  double kv_cache_memory_fraction = kDefaultEngineLimits.kv_cache_memory_fraction;
  int64_t max_model_len = 0;
  bool progress = true;

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("model_path", model_path, "model package folder (llmc-model.json, model.pt, tokenizer.json)");
    v("input", input,
      "OpenAI batch input file (JSONL: custom_id, method, url, body) or one prompt per line; - is stdin");
    v("output", output, "where the batch output JSONL goes, one line per input line in order; - is stdout");
    v("input_format", input_format, "auto (JSON objects or plain lines, by the first line), openai or prompts");
    v("max_tokens", max_tokens, "max_tokens of each plain prompt's completion");
    v("temperature", temperature, "temperature of each plain prompt's completion (0: greedy)");
    v("device", device, "auto, cpu, cuda or cuda:N");
    v("dtype", dtype, "activations dtype; empty: the package's");
    v("quantization", quantization, "empty: as the package is; int8, w8a16 or w8a8 quantizes at load");
    v("num_threads", num_threads, "CPU threads for the model; 0: every hardware thread (nproc)");
    v("max_running", max_running, "most sequences in the continuous batch");
    v("max_num_batched_tokens", max_num_batched_tokens, "token budget of one engine step");
    v("kv_cache_bytes", kv_cache_bytes, "KV cache size; 0: kv_cache_memory_fraction of available memory");
    v("kv_cache_memory_fraction", kv_cache_memory_fraction, "share of available memory for the KV cache");
    v("max_model_len", max_model_len, "context limit; 0: the model's");
    v("progress", progress, "show a progress line with tokens/s on stderr");
  }

  absl::Status Validate() const;
};

}  // namespace llmc::batch

#endif  // LLMC_TOOLS_BATCH_BATCH_CONFIG_H_
