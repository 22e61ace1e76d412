// Prefix caching in the continuous-batching engine: requests that find their prefix cached give exactly
// the output of an engine without the cache (greedy and seeded sampling, alone and in mixed batches, under
// eviction and preemption), n = 4 computes its prompt once, and usage reports the cached tokens.
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/collecting_sink.h"
#include "tests/support/model_scenario.h"
#include "tests/support/wait.h"
#include "worker/engine/engine.h"

namespace llmc::engine {
namespace {

using testing::CollectingSink;
using testing::Float32ParityDir;
using testing::StartFloat32ParityEngine;

constexpr int64_t kBlockSize = 16;

// Counts the prefill tokens the engine computes.
class PrefillCounter : public EngineObserver {
 public:
  void OnStep(const StepStats& step) override { prefill_tokens_ += step.num_prefill_tokens; }
  int64_t prefill_tokens() const { return prefill_tokens_; }

 private:
  std::atomic<int64_t> prefill_tokens_{0};
};

EngineOptions PrefixCacheOptions(bool prefix_caching, int64_t kv_cache_bytes = 64 << 20) {
  EngineOptions options;
  options.kv_cache_bytes = kv_cache_bytes;
  options.block_size = kBlockSize;
  options.max_num_batched_tokens = 48;  // long prompts prefill in chunks
  options.max_running = 8;
  options.max_waiting = 64;
  options.enable_prefix_caching = prefix_caching;
  return options;
}

int64_t BlockBytes() {
  static const int64_t bytes = [] {
    auto probe = model::LoadedModel::Load(Float32ParityDir() + "/package", {"cpu", ""});
    REQUIRE(probe.ok());
    return (*probe)->KvCacheBlockBytes(kBlockSize);
  }();
  return bytes;
}

// A prompt of `length` tokens: a shared prefix of `shared` tokens (the same for every `variant`), then
// tokens that differ per variant.
std::vector<int32_t> SharedPrefixPrompt(int64_t length, int64_t shared, int variant) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) {
    const int64_t salt = i < shared ? 0 : 7919 * (variant + 1);
    ids.push_back(static_cast<int32_t>((i * 37 + salt + 11) % 500 + 4));
  }
  return ids;
}

GenerationRequest PrefixRequest(std::vector<int32_t> prompt, bool sampled, uint32_t n = 1) {
  GenerationRequest request;
  request.request_id = "prefix";
  request.prompt_token_ids = std::move(prompt);
  request.sampling.temperature = sampled ? 1.0f : 0.0f;
  if (sampled) request.sampling.seed = 1234;
  request.sampling.max_tokens = 24;
  request.sampling.ignore_eos = true;
  request.sampling.n = n;
  return request;
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // per choice
  int64_t cached_tokens = 0;
};

// Submits every request at once and waits for all of them.
std::vector<Outcome> RunAll(Engine& engine, const std::vector<GenerationRequest>& requests) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const GenerationRequest& request : requests) {
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE(engine.Submit(request, sink).ok());
    sinks.push_back(sink);
  }
  std::vector<Outcome> outcomes;
  for (size_t r = 0; r < sinks.size(); ++r) {
    REQUIRE(sinks[r]->WaitDone());
    REQUIRE(sinks[r]->status().ok());
    Outcome outcome;
    for (uint32_t c = 0; c < requests[r].sampling.n; ++c) outcome.tokens.push_back(sinks[r]->choice(c).tokens);
    outcome.cached_tokens = sinks[r]->usage().cached_prompt_tokens();
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

std::vector<Outcome> RunOneByOne(Engine& engine, const std::vector<GenerationRequest>& requests) {
  std::vector<Outcome> outcomes;
  for (const GenerationRequest& request : requests) outcomes.push_back(RunAll(engine, {request}).front());
  return outcomes;
}

void CheckSameTokens(const std::vector<Outcome>& actual, const std::vector<Outcome>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t r = 0; r < actual.size(); ++r) {
    INFO("request " << r);
    CHECK(actual[r].tokens == expected[r].tokens);
  }
}

TEST_CASE("prefix cache: hits give the tokens of misses, greedy and seeded, alone and in mixed batches",
          "[integration][engine][prefix_cache]") {
  for (const bool sampled : {false, true}) {
    INFO((sampled ? "seeded sampling" : "greedy"));
    // Three variants share 70 tokens (4 full blocks); each is asked twice.
    std::vector<GenerationRequest> requests;
    for (int round = 0; round < 2; ++round) {
      for (int variant = 0; variant < 3; ++variant)
        requests.push_back(PrefixRequest(SharedPrefixPrompt(90, 70, variant), sampled));
    }
    auto uncached = StartFloat32ParityEngine(PrefixCacheOptions(false));
    const std::vector<Outcome> expected = RunOneByOne(*uncached, requests);
    for (const Outcome& outcome : expected) CHECK(outcome.cached_tokens == 0);

    auto cached = StartFloat32ParityEngine(PrefixCacheOptions(true));
    const std::vector<Outcome> alone = RunOneByOne(*cached, requests);
    CheckSameTokens(alone, expected);
    CHECK(alone[0].cached_tokens == 0);
    CHECK(alone[1].cached_tokens == 64);  // the shared 4 full blocks
    CHECK(alone[2].cached_tokens == 64);
    // Asked again, the whole prompt but its last partial block is cached (89 / 16 = 5 blocks).
    for (size_t r = 3; r < 6; ++r) CHECK(alone[r].cached_tokens == 80);

    // All at once in a fresh engine: some hit what others computed in earlier steps.
    auto mixed = StartFloat32ParityEngine(PrefixCacheOptions(true));
    CheckSameTokens(RunAll(*mixed, requests), expected);
    CheckSameTokens(RunAll(*mixed, requests), expected);
  }
}

TEST_CASE("prefix cache: eviction under memory pressure and preemption of sequences sharing blocks",
          "[integration][engine][prefix_cache]") {
  // 14 blocks of 16 tokens; each request needs 8 blocks (90 prompt + 24 generated tokens), so two cannot
  // finish together: decoders preempt one another, and cached blocks are evicted to make room.
  std::vector<GenerationRequest> requests;
  for (int variant = 0; variant < 6; ++variant)
    requests.push_back(PrefixRequest(SharedPrefixPrompt(90, 40, variant), false));
  auto uncached = StartFloat32ParityEngine(PrefixCacheOptions(false));
  const std::vector<Outcome> expected = RunOneByOne(*uncached, requests);

  auto cached = StartFloat32ParityEngine(PrefixCacheOptions(true, 14 * BlockBytes()));
  CheckSameTokens(RunAll(*cached, requests), expected);
  CHECK(cached->Load().num_preemptions > 0);
  // The first prompt's own blocks have been evicted since (with room to spare, 80 tokens would be cached),
  // but the prefix every request shared, freed last, is still cached.
  const Outcome again = RunAll(*cached, {requests[0]}).front();
  CHECK(again.tokens == expected[0].tokens);
  CHECK(again.cached_tokens >= 32);
  CHECK(again.cached_tokens < 80);
  CHECK(testing::WaitUntil([&] { return cached->Load().num_kv_blocks_used == 0; }, absl::Seconds(10)));
}

TEST_CASE("prefix cache: n = 4 computes its prompt once and the choices sample as without the cache",
          "[integration][engine][prefix_cache]") {
  const GenerationRequest request = PrefixRequest(SharedPrefixPrompt(100, 100, 0), /*sampled=*/true, /*n=*/4);
  PrefillCounter uncached_counter, cached_counter;
  auto uncached = StartFloat32ParityEngine(PrefixCacheOptions(false), &uncached_counter);
  auto cached = StartFloat32ParityEngine(PrefixCacheOptions(true), &cached_counter);
  const int64_t uncached_warmup = uncached_counter.prefill_tokens();
  const int64_t cached_warmup = cached_counter.prefill_tokens();
  const Outcome expected = RunAll(*uncached, {request}).front();
  const Outcome actual = RunAll(*cached, {request}).front();
  CHECK(actual.tokens == expected.tokens);
  CHECK(uncached_counter.prefill_tokens() - uncached_warmup == 4 * 100);
  // Once: the later choices share all its blocks (copying the partial last one) and compute only the last
  // prompt token, a one-token step.
  CHECK(cached_counter.prefill_tokens() - cached_warmup == 100);
  CHECK(actual.cached_tokens == 0);  // choice 0 found nothing cached
  for (size_t c = 1; c < 4; ++c) CHECK(actual.tokens[c] != actual.tokens[0]);
}

TEST_CASE("prefix cache: only requests with the same cache_salt share cached blocks, with the tokens of misses",
          "[integration][engine][prefix_cache]") {
  auto engine = StartFloat32ParityEngine(PrefixCacheOptions(true));
  const auto salted = [](std::string salt) {
    GenerationRequest request = PrefixRequest(SharedPrefixPrompt(70, 70, 0), /*sampled=*/false);
    request.cache_salt = std::move(salt);
    return request;
  };
  const std::vector<Outcome> outcomes =
      RunOneByOne(*engine, {salted("alice"), salted("bob"), salted(""), salted("alice"), salted("bob")});
  CHECK(outcomes[0].cached_tokens == 0);
  CHECK(outcomes[1].cached_tokens == 0);  // another salt: alice's blocks are not bob's
  CHECK(outcomes[2].cached_tokens == 0);  // nor the unsalted cache's
  CHECK(outcomes[3].cached_tokens == 64);
  CHECK(outcomes[4].cached_tokens == 64);
  for (const Outcome& outcome : outcomes) CHECK(outcome.tokens == outcomes[0].tokens);
}

}  // namespace
}  // namespace llmc::engine
