// Prompt logprobs in the continuous-batching engine against the full-recompute reference
// (tests/python/make_parity_fixture.py): a prompt made of a scenario's prompt and the first tokens of its
// greedy continuation has, at those positions, the logprobs of the reference logits, and rank 1. Alone,
// prefilled in chunks, beside generations, with n = 2, and recomputed after preemption.
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
using testing::Float32ParityReference;
using testing::Float32ParityTokenizer;
using testing::SmallParityEngineOptions;
using testing::StartFloat32ParityEngine;
using testing::SubmitCollecting;
using testing::ToIds;

constexpr int64_t kForcedTokens = 20;  // continuation tokens appended to each scenario prompt
constexpr uint32_t kAlternatives = 3;

// Scenario `s`'s prompt followed by the first kForcedTokens tokens of its greedy continuation.
std::vector<int32_t> ForcedPrompt(size_t s) {
  std::vector<int32_t> prompt = ToIds(Float32ParityReference().prompts[s]);
  const std::vector<int32_t> continuation = ToIds(Float32ParityReference().continuations[s]);
  prompt.insert(prompt.end(), continuation.begin(), continuation.begin() + kForcedTokens);
  return prompt;
}

GenerationRequest Scored(size_t s, uint32_t n) {
  GenerationRequest request;
  request.request_id = "scored";
  request.prompt_token_ids = ForcedPrompt(s);
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 4;
  request.sampling.ignore_eos = true;
  request.sampling.n = n;
  request.sampling.prompt_logprobs = kAlternatives;
  return request;
}

GenerationRequest ScenarioGreedy(size_t s) {
  return testing::ReferenceGreedyRequest(Float32ParityReference().prompts[s]);
}

void CheckScored(CollectingSink& sink, size_t s, uint32_t n) {
  REQUIRE(sink.WaitDone());
  REQUIRE(sink.status().ok());
  CHECK(sink.num_prompt_logprob_responses() == 1);
  CHECK(sink.prompt_logprobs_came_first());
  const std::vector<int32_t> prompt = ForcedPrompt(s);
  const std::vector<v1::TokenLogprob> logprobs = sink.prompt_logprobs();
  REQUIRE(logprobs.size() == prompt.size());
  CHECK(logprobs[0].token_id() == prompt[0]);
  CHECK(logprobs[0].top().empty());
  for (size_t i = 1; i < prompt.size(); ++i) {
    INFO("position " << i);
    const v1::TokenLogprob& entry = logprobs[i];
    CHECK(entry.token_id() == prompt[i]);
    CHECK(entry.token_bytes() == std::string(Float32ParityTokenizer().TokenBytes(prompt[i])));
    CHECK(entry.rank() >= 1);
    REQUIRE(entry.top_size() == static_cast<int>(kAlternatives));
    for (int k = 1; k < entry.top_size(); ++k) CHECK(entry.top(k - 1).logprob() >= entry.top(k).logprob());
    CHECK(entry.top(0).logprob() >= entry.logprob());
    CHECK(entry.logprob() <= 0.0f);
  }
  // Where the prompt is the greedy continuation, the reference logits give the distribution.
  const int64_t scenario_prompt = Float32ParityReference().prompts[s].numel();
  for (int64_t j = 0; j < kForcedTokens; ++j) {
    INFO("forced token " << j);
    const at::Tensor expected = at::log_softmax(Float32ParityReference().logits[s][j].to(at::kFloat), 0);
    const auto [values, ids] = expected.topk(kAlternatives);
    const v1::TokenLogprob& entry = logprobs[scenario_prompt + j];
    CHECK(std::abs(entry.logprob() - expected[prompt[scenario_prompt + j]].item<float>()) < 1e-3f);
    CHECK(entry.rank() == 1);
    CHECK(entry.top(0).token_id() == entry.token_id());
    for (int64_t k = 0; k < static_cast<int64_t>(kAlternatives); ++k) {
      CHECK(std::abs(entry.top(static_cast<int>(k)).logprob() - values[k].item<float>()) < 1e-3f);
    }
  }
  const std::vector<int32_t> continuation = ToIds(Float32ParityReference().continuations[s]);
  const std::vector<int32_t> expected_tokens(continuation.begin() + kForcedTokens,
                                             continuation.begin() + kForcedTokens + 4);
  for (uint32_t c = 0; c < n; ++c) CHECK(sink.choice(c).tokens == expected_tokens);
  CHECK(sink.usage().prompt_tokens() == prompt.size());
}

TEST_CASE("engine prompt logprobs: equal the reference alone, chunked, with n = 2 and beside generations",
          "[integration][engine][logprobs]") {
  auto engine = StartFloat32ParityEngine(SmallParityEngineOptions());
  const size_t num_scenarios = Float32ParityReference().prompts.size();
  for (size_t s = 0; s < num_scenarios; ++s) {
    INFO("scenario " << s << " alone");
    CheckScored(*SubmitCollecting(*engine, Scored(s, 1)), s, 1);
  }
  std::vector<std::shared_ptr<CollectingSink>> generations, scored;
  generations.push_back(SubmitCollecting(*engine, ScenarioGreedy(1)));
  for (size_t s = 0; s < num_scenarios; ++s) scored.push_back(SubmitCollecting(*engine, Scored(s, 2)));
  generations.push_back(SubmitCollecting(*engine, ScenarioGreedy(3)));
  for (size_t s = 0; s < num_scenarios; ++s) {
    INFO("scenario " << s << " with n = 2 in a mixed batch");
    CheckScored(*scored[s], s, 2);
  }
  for (size_t g = 0; g < generations.size(); ++g) {
    REQUIRE(generations[g]->WaitDone());
    CHECK(generations[g]->choice(0).tokens == ToIds(Float32ParityReference().continuations[g == 0 ? 1 : 3]));
    CHECK(generations[g]->num_prompt_logprob_responses() == 0);
  }
  CHECK(testing::WaitUntil([&] { return engine->Load().num_kv_blocks_used == 0; }, absl::Seconds(10)));
}

TEST_CASE("engine prompt logprobs: start over when a preempted prompt is recomputed",
          "[integration][engine][logprobs]") {
  EngineOptions options = SmallParityEngineOptions();
  auto probe = model::LoadedModel::Load(testing::Float32ParityDir() + "/package", {"cpu", ""});
  REQUIRE(probe.ok());
  // 8 blocks of 16 tokens: two 40-token generations take 6 blocks once they decode, so the 60-token scored
  // prompts (4 blocks) are preempted and readmitted.
  options.kv_cache_bytes = 8 * (*probe)->KvCacheBlockBytes(options.block_size);
  auto engine = StartFloat32ParityEngine(options);
  std::vector<std::shared_ptr<CollectingSink>> generations, scored;
  for (int round = 0; round < 2; ++round) {
    generations.push_back(SubmitCollecting(*engine, ScenarioGreedy(3)));
    scored.push_back(SubmitCollecting(*engine, Scored(3, 1)));
    scored.push_back(SubmitCollecting(*engine, Scored(2, 1)));
  }
  for (size_t e = 0; e < scored.size(); ++e) {
    INFO("scored request " << e);
    CheckScored(*scored[e], e % 2 == 0 ? 3 : 2, 1);
  }
  for (auto& generation : generations) {
    REQUIRE(generation->WaitDone());
    CHECK(generation->choice(0).tokens == ToIds(Float32ParityReference().continuations[3]));
  }
  CHECK(engine->Load().num_preemptions > 0);
}

}  // namespace
}  // namespace llmc::engine
