#ifndef LLMC_TOOLS_BENCH_LOAD_RUNNER_H_
#define LLMC_TOOLS_BENCH_LOAD_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_metrics.h"
#include "tools/bench/openai_protocol.h"
#include "tools/bench/prompt_dataset.h"

namespace llmc::bench {

struct RunnerOptions {
  ServerUrl url;
  std::string path;  // e.g. /v1/chat/completions
  std::string model;
  std::string api_key;  // empty: no Authorization header
  bool chat = true;
  bool ignore_eos = false;
  double temperature = 0;
  int64_t max_concurrency = 0;  // 0: no limit
  std::string system_prompt;    // multi-turn: the system message that starts every conversation
  absl::Duration request_timeout = absl::Seconds(600);
  absl::Duration max_duration = absl::Hours(1);
};

// Where a run stands, for the progress bar.
struct RunProgress {
  int64_t total = 0;
  int64_t completed = 0;  // succeeded
  int64_t failed = 0;
  int64_t in_flight = 0;
  int64_t output_tokens = 0;  // of completed requests
  double elapsed_s = 0;
};

struct RunOutput {
  std::vector<RequestResult> results;  // one per prompt, in prompt order
  double duration_s = 0;               // from the first arrival to the last response's end
  bool hit_max_duration = false;
};

// Sends `prompts[i]` at `arrivals_s[i]` seconds after the start (a later turn of a conversation instead once
// the turn before it has ended, with the conversation so far as its history) (or later, while `max_concurrency`
// requests are in flight), each as one streaming request over a keep-alive connection from a pool (a
// reused connection that the server had closed is retried once on a new one), and records what each saw.
// Blocking: it runs its own Boost.Asio event loop on the calling thread, so timings are taken on one thread
// as bytes arrive. Every request is bounded by `request_timeout` and the run by `max_duration` (requests
// still running then, or not yet sent, count as failed). `on_progress` runs about four times a second and
// once at the end. Fails only when the host cannot be resolved.
absl::StatusOr<RunOutput> RunLoad(const RunnerOptions& options, const std::vector<BenchPrompt>& prompts,
                                  const std::vector<double>& arrivals_s,
                                  const std::function<void(const RunProgress&)>& on_progress = nullptr);

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// One bounded GET over a fresh connection (the models listing, say).
absl::StatusOr<HttpAnswer> HttpGet(const ServerUrl& url, const std::string& path, const std::string& api_key,
                                   absl::Duration timeout);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_LOAD_RUNNER_H_
