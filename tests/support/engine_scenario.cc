#include "tests/support/engine_scenario.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/collecting_sink.h"
#include "tests/support/tokenizer_files.h"
#include "tests/support/wait.h"
#include "worker/engine/engine.h"

namespace llmc::testing {
namespace {

constexpr int64_t kBlockSize = 16;
constexpr int64_t kNumBlocks = 8;  // the longest sequence needs 5; all four together 3 + 4 + 5 + 5
constexpr size_t kExtension = 16;  // greedy tokens appended to a prompt for the extended prefix-cache hit

// The prompt's full blocks, but never its last token: its logits give the next token.
int64_t CachedTokensFor(int64_t prompt_length) { return (prompt_length - 1) / kBlockSize * kBlockSize; }

std::vector<int32_t> Slice(const std::vector<int32_t>& ids, size_t begin, size_t end) {
  return std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                              ids.begin() + static_cast<std::ptrdiff_t>(end));
}

// Waits for `sink` and checks it finished with `expected` greedy tokens; returns its cached prompt tokens.
int64_t CheckGreedy(CollectingSink& sink, const std::vector<int32_t>& expected) {
  REQUIRE(sink.WaitDone());
  INFO(sink.status().ToString());
  REQUIRE(sink.status().ok());
  CHECK(sink.indices_contiguous());
  CHECK(sink.choice(0).tokens == expected);
  return sink.usage().cached_prompt_tokens();
}

}  // namespace

EngineScenarioResult RunEngineScenario(std::unique_ptr<model::LoadedModel> model, const ModelReference& reference) {
  REQUIRE(reference.prompts.size() >= 2);
  engine::EngineOptions options;
  options.kv_cache_bytes = kNumBlocks * model->KvCacheBlockBytes(kBlockSize);
  options.block_size = kBlockSize;
  options.max_num_batched_tokens = 32;  // the 33- and 40-token prompts prefill in chunks, alone or not
  options.max_running = 4;
  options.max_waiting = 16;
  options.enable_prefix_caching = true;
  // Greedy ignoring EOS never stops on a token, so any vocabulary covering the ids detokenizes.
  auto created = engine::Engine::Create(std::move(model), RealTokenizer("qwen3"), options);
  INFO(created.status().ToString());
  REQUIRE(created.ok());
  engine::Engine& engine = **created;
  REQUIRE(engine.Start().ok());
  REQUIRE(engine.Load().num_kv_blocks == kNumBlocks);
  EngineScenarioResult result;

  std::vector<std::vector<int32_t>> expected;
  for (const at::Tensor& continuation : reference.continuations) expected.push_back(ToIds(continuation));
  const size_t count = reference.prompts.size();

  // Alone, one after the other. The prompts are random: none finds another's blocks.
  for (size_t s = 0; s < count; ++s) {
    INFO("prompt " << s << " alone");
    auto sink = SubmitCollecting(engine, ReferenceGreedyRequest(reference.prompts[s]));
    CHECK(CheckGreedy(*sink, expected[s]) == 0);
  }

  // The last prompt again: its blocks, just freed, are still cached.
  const size_t last = count - 1;
  const std::vector<int32_t> prompt = ToIds(reference.prompts[last]);
  {
    INFO("prompt " << last << " again, from the prefix cache");
    auto sink = SubmitCollecting(engine, ReferenceGreedyRequest(reference.prompts[last]));
    result.repeat_cached_tokens = CheckGreedy(*sink, expected[last]);
    CHECK(result.repeat_cached_tokens == CachedTokensFor(static_cast<int64_t>(prompt.size())));
    CHECK(result.repeat_cached_tokens > 0);
  }
  // Extended by its first greedy tokens: greedy goes on with the rest of the continuation, and the blocks the
  // decode steps filled are found too.
  {
    INFO("prompt " << last << " extended by " << kExtension << " greedy tokens, from the prefix cache");
    engine::GenerationRequest request = ReferenceGreedyRequest(reference.prompts[last]);
    request.prompt_token_ids.insert(request.prompt_token_ids.end(), expected[last].begin(),
                                    expected[last].begin() + kExtension);
    request.sampling.max_tokens = static_cast<uint32_t>(expected[last].size() - kExtension);
    const int64_t extended_length = static_cast<int64_t>(request.prompt_token_ids.size());
    auto sink = SubmitCollecting(engine, std::move(request));
    result.extend_cached_tokens = CheckGreedy(*sink, Slice(expected[last], kExtension, expected[last].size()));
    CHECK(result.extend_cached_tokens == CachedTokensFor(extended_length));
    CHECK(result.extend_cached_tokens > CachedTokensFor(static_cast<int64_t>(prompt.size())));
  }

  // Together, in a pool too small for them: submitted at once, the longer prompts prefill in chunks beside the
  // shorter ones' decode steps, and the four need 17 blocks before the first ends, so the engine must preempt
  // sequences and later recompute them. Their own salt keeps the blocks cached above out of it: every prompt is
  // computed. (A sequence preempted before its first token may find its own prompt blocks cached again.)
  const int64_t preemptions_before = engine.Load().num_preemptions;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t s = 0; s < count; ++s) {
    engine::GenerationRequest request = ReferenceGreedyRequest(reference.prompts[s]);
    request.request_id = "batched-" + std::to_string(s);
    request.cache_salt = "engine-scenario-batch";
    sinks.push_back(SubmitCollecting(engine, std::move(request)));
  }
  for (size_t s = 0; s < count; ++s) {
    INFO("prompt " << s << " in the batch under preemption");
    CheckGreedy(*sinks[s], expected[s]);
  }
  result.num_preemptions = engine.Load().num_preemptions - preemptions_before;
  CHECK(result.num_preemptions > 0);

  // Nothing leaked: every block is free (or only cached) once the requests are done.
  CHECK(WaitUntil(
      [&] {
        const engine::EngineLoad load = engine.Load();
        return engine.NumUnfinished() == 0 && load.num_running == 0 && load.num_waiting == 0 &&
               load.num_kv_blocks_used == 0;
      },
      absl::Seconds(10)));
  engine.Stop();
  return result;
}

}  // namespace llmc::testing
