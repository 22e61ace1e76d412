// Engine-level aggregate decode throughput: C concurrent requests through the continuous-batching engine,
// against the same engine limited to one running sequence (what FastChat's default worker does), in one
// run. Prints figures, including peak KV blocks used against those allocated; judges nothing.
//
//   llmc_engine_bench <package-dir> [max_tokens]
#include <ATen/Parallel.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_observer.h"

namespace {

using llmc::engine::Engine;

class CountingSink : public llmc::engine::GenerationSink {
 public:
  void OnResponse(llmc::v1::GenerateResponse response) override {
    for (const auto& delta : response.deltas()) tokens_ += delta.token_ids_size();
  }
  void OnDone(absl::Status status) override {
    ok_ = status.ok();
    done_.Notify();
  }
  bool Wait() { return done_.WaitForNotificationWithTimeout(absl::Minutes(30)) && ok_; }
  int64_t tokens() const { return tokens_.load(); }

 private:
  std::atomic<int64_t> tokens_{0};
  bool ok_ = false;
  absl::Notification done_;
};

// Time per decode-only step, and how much of it the engine spent outside the model (scheduling, the batch,
// sampling, detokenizing, queueing deliveries).
class StepTimer : public llmc::engine::EngineObserver {
 public:
  void OnStep(const llmc::engine::StepStats& step) override {
    if (step.num_prefill_tokens > 0) return;
    absl::MutexLock lock(&mu_);
    ++steps_;
    step_seconds_ += absl::ToDoubleSeconds(step.step_time);
    host_seconds_ += absl::ToDoubleSeconds(step.step_time - step.model_time);
  }
  double MeanStepMs() const {
    absl::MutexLock lock(&mu_);
    return steps_ > 0 ? step_seconds_ / steps_ * 1e3 : 0;
  }
  double MeanHostMs() const {
    absl::MutexLock lock(&mu_);
    return steps_ > 0 ? host_seconds_ / steps_ * 1e3 : 0;
  }

 private:
  mutable absl::Mutex mu_;
  int64_t steps_ = 0;
  double step_seconds_ = 0, host_seconds_ = 0;
};

struct Result {
  double tokens_per_second = 0;
  int64_t peak_blocks = 0, blocks = 0;
  double decode_step_ms = 0, host_ms = 0;
};

// `requests` requests at once, each with its own prompt (no two share a prefix), `max_tokens` each.
Result Measure(const std::string& package, const llmc::tokenizer::Tokenizer& tokenizer, int64_t max_running,
               int requests, uint32_t max_tokens) {
  auto model = llmc::model::LoadedModel::Load(package, {"cpu", ""});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    std::exit(1);
  }
  llmc::engine::EngineOptions options;
  options.kv_cache_bytes = 2LL << 30;
  options.max_running = max_running;
  options.max_num_batched_tokens = 512;
  options.max_model_len = 4096;
  StepTimer timer;
  auto engine = Engine::Create(std::move(*model), tokenizer, options, &timer);
  if (!engine.ok() || !(*engine)->Start().ok()) std::exit(1);
  std::vector<std::shared_ptr<CountingSink>> sinks;
  std::atomic<bool> sampling{true};
  std::atomic<int64_t> peak{0};
  std::thread watcher([&] {
    while (sampling.load()) {
      peak = std::max(peak.load(), (*engine)->Load().num_kv_blocks_used);
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  const absl::Time start = absl::Now();
  for (int r = 0; r < requests; ++r) {
    llmc::engine::GenerationRequest request;
    for (int t = 0; t < 64; ++t) request.prompt_token_ids.push_back((r * 7919 + t * 104729) % 150000 + 10);
    request.sampling.temperature = 0;
    request.sampling.max_tokens = max_tokens;
    request.sampling.ignore_eos = true;
    sinks.push_back(std::make_shared<CountingSink>());
    if (!(*engine)->Submit(std::move(request), sinks.back()).ok()) std::exit(1);
  }
  int64_t tokens = 0;
  for (auto& sink : sinks) {
    if (!sink->Wait()) std::exit(1);
    tokens += sink->tokens();
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  sampling = false;
  watcher.join();
  Result result{tokens / seconds, peak.load(), (*engine)->Load().num_kv_blocks, timer.MeanStepMs(), timer.MeanHostMs()};
  (*engine)->Stop();
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <package-dir> [max_tokens]\n", argv[0]);
    return 2;
  }
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency()));
  const std::string package = argv[1];
  const uint32_t max_tokens = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 32;
  auto tokenizer = llmc::tokenizer::Tokenizer::FromFile(package + "/tokenizer.json");
  if (!tokenizer.ok()) return 1;
  std::printf("package %s, %u output tokens per request, 64-token prompts, %d threads\n", package.c_str(), max_tokens,
              at::get_num_threads());
  std::printf("%11s %16s %16s %8s %18s %16s %14s\n", "concurrent", "batched tok/s", "one-at-a-time", "ratio",
              "KV blocks peak/all", "decode step ms", "host ms (%)");
  // One running sequence makes aggregate throughput the single-stream rate whatever the concurrency, so the
  // baseline runs at most 4 requests (one after another) to keep the run short.
  for (const int concurrent : {1, 4, 16, 32}) {
    const Result batched = Measure(package, **tokenizer, 32, concurrent, max_tokens);
    const Result serial = Measure(package, **tokenizer, 1, std::min(concurrent, 4), max_tokens);
    std::printf("%11d %16.1f %16.1f %7.1fx %11lld/%lld %16.2f %7.2f (%.1f%%)\n", concurrent, batched.tokens_per_second,
                serial.tokens_per_second, batched.tokens_per_second / serial.tokens_per_second,
                static_cast<long long>(batched.peak_blocks), static_cast<long long>(batched.blocks),
                batched.decode_step_ms, batched.host_ms,
                batched.decode_step_ms > 0 ? batched.host_ms / batched.decode_step_ms * 100 : 0.0);
    std::fflush(stdout);
  }
  return 0;
}
