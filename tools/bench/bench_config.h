#ifndef LLMC_TOOLS_BENCH_BENCH_CONFIG_H_
#define LLMC_TOOLS_BENCH_BENCH_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace llmc::bench {

// The flags of `llmc-bench run` (the default command). Flags are spelled --input-len or --input_len alike.
struct BenchConfig {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "chat";  // chat, completions, or a path such as /v1/chat/completions
  std::string model;              // empty: the first model GET /v1/models lists
  std::string api_key;            // empty: $OPENAI_API_KEY when set
  std::string prompts_file;       // JSONL; empty: the random dataset
  uint32_t input_len = 256;
  uint32_t output_len = 128;
  double range_ratio = 0.0;
  uint32_t num_prompts = 100;
  uint32_t turns = 1;              // >1: num_prompts conversations of this many turns
  uint32_t shared_prefix_len = 0;  // words of a system prompt every conversation starts with
  std::string request_rate = "inf";
  double burstiness = 1.0;
  uint32_t max_concurrency = 0;  // 0: unlimited
  bool ignore_eos = false;
  double temperature = 0.0;
  uint64_t seed = 0;
  std::string run_id;  // empty: random per run
  absl::Duration timeout = absl::Seconds(600);
  absl::Duration max_duration = absl::Hours(1);
  std::vector<std::string> goodput;
  std::string output_json;
  std::string label;
  bool save_detailed = false;
  bool disable_progress = false;
  bool check_request = true;

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("base_url", base_url, "http://host:port of the OpenAI-compatible server, with or without a trailing /v1");
    v("endpoint", endpoint, "chat (/v1/chat/completions), completions (/v1/completions), or a path");
    v("model", model, "model name sent with each request; empty asks GET /v1/models and takes the first");
    v("api_key", api_key, "bearer API key; empty uses $OPENAI_API_KEY when set");
    v("prompts_file", prompts_file,
      "JSONL file, one {\"prompt\": ..., \"output_len\": N} per line (output_len optional); empty: random dataset");
    v("input_len", input_len, "random dataset: prompt length in words (one token each in BPE vocabularies)");
    v("output_len", output_len, "max_tokens of each request (prompts-file lines may override it)");
    v("range_ratio", range_ratio, "random dataset: lengths drawn uniformly from [len*(1-r), len*(1+r)], r in [0, 1)");
    v("num_prompts", num_prompts, "number of requests to send (with --turns above 1: of conversations)");
    v("turns", turns,
      "random dataset: user turns per conversation; each turn is sent once the previous one has its answer, "
      "with the conversation so far (multi-turn chat, for prefix caching)");
    v("shared_prefix_len", shared_prefix_len,
      "random dataset: words of a system prompt that every conversation shares (0: none)");
    v("request_rate", request_rate, "requests per second (arrivals by a gamma process), or inf to send all at once");
    v("burstiness", burstiness, "gamma shape of inter-arrival times: 1 is Poisson, <1 burstier, >1 more regular");
    v("max_concurrency", max_concurrency, "most requests in flight at once; 0 for no limit");
    v("ignore_eos", ignore_eos, "send ignore_eos so every request generates exactly its max_tokens");
    v("temperature", temperature, "sampling temperature sent with each request");
    v("seed", seed, "seed of the random dataset and the arrival times");
    v("run_id", run_id,
      "words at the start of every random prompt encode this id and the request index; empty: random per run");
    v("timeout", timeout, "limit of one request, from sending it to its last byte");
    v("max_duration", max_duration, "limit of the whole run; requests still running then count as failed");
    v("goodput", goodput,
      "latency objectives in ms, e.g. ttft:500,tpot:50,e2el:10000; goodput counts requests meeting all");
    v("output_json", output_json, "write the results to this JSON file");
    v("label", label, "name of this run's series in compare tables and plots");
    v("save_detailed", save_detailed, "also write every request's timings to the JSON file");
    v("disable_progress", disable_progress, "no progress bar on stderr");
    v("check_request", check_request, "send one short request first and stop with its error if it fails");
  }

  absl::Status Validate() const;
};

// Latency objectives of --goodput, in milliseconds; a negative value means none.
struct GoodputObjectives {
  double ttft_ms = -1;
  double tpot_ms = -1;
  double e2el_ms = -1;

  bool any() const { return ttft_ms >= 0 || tpot_ms >= 0 || e2el_ms >= 0; }
};

// Parses "ttft:500", "tpot:50", "e2el:10000" items (each at most once, values > 0).
absl::StatusOr<GoodputObjectives> ParseGoodput(const std::vector<std::string>& items);

// --request-rate: a positive number, or "inf" (returned as +infinity).
absl::StatusOr<double> ParseRequestRate(const std::string& text);

// Rewrites command-line arguments into the form the common configuration loader reads: flag names with
// dashes become underscores (--input-len → --input_len), and the values after `--goodput` that are not
// flags are joined with commas (vLLM's `--goodput ttft:500 tpot:50`).
std::vector<std::string> NormalizeFlagArgs(const std::vector<std::string>& args);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_BENCH_CONFIG_H_
