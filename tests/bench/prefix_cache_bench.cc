// What the engine's prefix cache saves, measured side by side in one run: time to first token of a request
// whose long prefix is cached against a cold one, and the prefill tokens an 8-turn chat computes with and
// without the cache. Prints figures; judges nothing.
//
//   llmc_prefix_cache_bench <package-dir> [prefix_tokens, default 2000]
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_observer.h"

namespace {

using llmc::engine::Engine;

// Collects a request's tokens and when its first one came.
class TimingSink : public llmc::engine::GenerationSink {
 public:
  void OnResponse(llmc::v1::GenerateResponse response) override {
    if (first_token_ == absl::InfiniteFuture()) first_token_ = absl::Now();
    for (const auto& delta : response.deltas())
      tokens_.insert(tokens_.end(), delta.token_ids().begin(), delta.token_ids().end());
    if (response.has_usage()) cached_ = response.usage().cached_prompt_tokens();
  }
  void OnDone(absl::Status status) override {
    ok_ = status.ok();
    done_.Notify();
  }
  void Wait() {
    if (!done_.WaitForNotificationWithTimeout(absl::Minutes(30)) || !ok_) {
      std::fprintf(stderr, "a request failed\n");
      std::exit(1);
    }
  }
  absl::Time first_token() const { return first_token_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t cached() const { return cached_; }

 private:
  absl::Time first_token_ = absl::InfiniteFuture();
  std::vector<int32_t> tokens_;
  int64_t cached_ = 0;
  bool ok_ = false;
  absl::Notification done_;
};

class PrefillCounter : public llmc::engine::EngineObserver {
 public:
  void OnStep(const llmc::engine::StepStats& step) override { prefill_tokens_ += step.num_prefill_tokens; }
  int64_t prefill_tokens() const { return prefill_tokens_.load(); }

 private:
  std::atomic<int64_t> prefill_tokens_{0};
};

std::unique_ptr<Engine> StartEngine(const std::string& package, const llmc::tokenizer::Tokenizer& tokenizer,
                                    bool prefix_caching, PrefillCounter* counter) {
  auto model = llmc::model::LoadedModel::Load(package, {"cpu", ""});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    std::exit(1);
  }
  llmc::engine::EngineOptions options;
  options.kv_cache_bytes = 2LL << 30;
  options.max_num_batched_tokens = 512;
  options.max_model_len = 8192;
  options.enable_prefix_caching = prefix_caching;
  auto engine = Engine::Create(std::move(*model), tokenizer, options, counter);
  if (!engine.ok() || !(*engine)->Start().ok()) std::exit(1);
  return std::move(*engine);
}

std::vector<int32_t> RandomTokens(int64_t count, int64_t seed) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < count; ++t) ids.push_back(static_cast<int32_t>((seed * 7919 + t * 104729) % 150000 + 10));
  return ids;
}

// Runs one greedy request and returns its sink.
std::shared_ptr<TimingSink> Run(Engine& engine, std::vector<int32_t> prompt, uint32_t max_tokens,
                                double* ttft_ms = nullptr) {
  llmc::engine::GenerationRequest request;
  request.prompt_token_ids = std::move(prompt);
  request.sampling.temperature = 0;
  request.sampling.max_tokens = max_tokens;
  request.sampling.ignore_eos = true;
  auto sink = std::make_shared<TimingSink>();
  const absl::Time start = absl::Now();
  if (!engine.Submit(std::move(request), sink).ok()) std::exit(1);
  sink->Wait();
  if (ttft_ms != nullptr) *ttft_ms = absl::ToDoubleMilliseconds(sink->first_token() - start);
  return sink;
}

// An 8-turn chat: each turn's prompt is the conversation so far (earlier prompts and answers) plus a new
// 60-token user message; 32 tokens are generated per turn. Returns the prefill tokens computed.
int64_t MultiTurnPrefill(const std::string& package, const llmc::tokenizer::Tokenizer& tokenizer, bool caching,
                         int64_t system_tokens) {
  PrefillCounter counter;
  auto engine = StartEngine(package, tokenizer, caching, &counter);
  const int64_t warmup = counter.prefill_tokens();
  std::vector<int32_t> conversation = RandomTokens(system_tokens, 1);
  for (int turn = 0; turn < 8; ++turn) {
    const std::vector<int32_t> user = RandomTokens(60, 100 + turn);
    conversation.insert(conversation.end(), user.begin(), user.end());
    const auto answer = Run(*engine, conversation, 32);
    conversation.insert(conversation.end(), answer->tokens().begin(), answer->tokens().end());
  }
  const int64_t computed = counter.prefill_tokens() - warmup;
  engine->Stop();
  return computed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <package-dir> [prefix_tokens]\n", argv[0]);
    return 2;
  }
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency()));
  const std::string package = argv[1];
  const int64_t prefix_tokens = argc > 2 ? std::atoll(argv[2]) : 2000;
  auto tokenizer = llmc::tokenizer::Tokenizer::FromFile(package + "/tokenizer.json");
  if (!tokenizer.ok()) return 1;
  std::printf("package %s, %d threads\n", package.c_str(), at::get_num_threads());

  // TTFT: three prefixes, each first cold (nothing cached), then warm with another 16-token question.
  auto engine = StartEngine(package, **tokenizer, true, nullptr);
  std::vector<double> cold, warm;
  int64_t cached = 0;
  for (int round = 0; round < 3; ++round) {
    const std::vector<int32_t> prefix = RandomTokens(prefix_tokens, 1000 + round);
    for (int question = 0; question < 2; ++question) {
      std::vector<int32_t> prompt = prefix;
      const std::vector<int32_t> asked = RandomTokens(16, 5000 + round * 2 + question);
      prompt.insert(prompt.end(), asked.begin(), asked.end());
      double ttft_ms = 0;
      const auto sink = Run(*engine, prompt, 1, &ttft_ms);
      (question == 0 ? cold : warm).push_back(ttft_ms);
      if (question == 1) cached = sink->cached();
    }
  }
  engine->Stop();
  std::sort(cold.begin(), cold.end());
  std::sort(warm.begin(), warm.end());
  std::printf(
      "TTFT, %lld-token prefix + 16-token question (median of 3): cold %.1f ms, prefix cached %.1f ms "
      "(%lld tokens cached) = %.3fx\n",
      static_cast<long long>(prefix_tokens), cold[1], warm[1], static_cast<long long>(cached), warm[1] / cold[1]);
  std::fflush(stdout);

  const int64_t system_tokens = 200;
  const int64_t without = MultiTurnPrefill(package, **tokenizer, false, system_tokens);
  const int64_t with = MultiTurnPrefill(package, **tokenizer, true, system_tokens);
  std::printf(
      "8-turn chat (%lld-token system prompt, 60-token messages, 32-token answers): prefill tokens "
      "computed %lld without the cache, %lld with = %.3fx\n",
      static_cast<long long>(system_tokens), static_cast<long long>(without), static_cast<long long>(with),
      static_cast<double>(with) / static_cast<double>(without));
  return 0;
}
