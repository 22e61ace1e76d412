#ifndef LLMC_TESTS_SUPPORT_ENGINE_SCENARIO_H_
#define LLMC_TESTS_SUPPORT_ENGINE_SCENARIO_H_

#include <cstdint>
#include <memory>

#include "tests/support/model_scenario.h"
#include "worker/model/loaded_model.h"

namespace llmc::testing {

// What RunEngineScenario saw, for the families' reports (it has checked them already).
struct EngineScenarioResult {
  int64_t num_preemptions = 0;       // in the batch that had to share a KV pool too small for it
  int64_t repeat_cached_tokens = 0;  // a prompt asked again: its prompt tokens found in the prefix cache
  int64_t extend_cached_tokens = 0;  // that prompt extended by its first 16 greedy tokens: likewise
};

// A family's serving path through the real engine (a KV pool of 8 blocks of 16 tokens, prompts prefilled in
// chunks of at most 32 tokens, prefix caching on, the tokenizer of tests/support/tokenizer_files.h) on `model`,
// float32 greedy, each sequence's tokens checked identical to the reference's continuation:
//   - each reference prompt alone, in turn (nothing found in the prefix cache);
//   - the last prompt again: a prefix-cache hit of its full blocks, checked to be reported in the usage; then
//     that prompt with its first 16 greedy tokens appended, which also finds the blocks its decode wrote, and
//     must give the remaining 16;
//   - all prompts in one batch, under a cache salt of their own (no blocks cached above): the longer prompts
//     prefill in chunks beside the shorter ones' decode steps, and together they need more blocks than the pool
//     has, so the engine must preempt and later recompute sequences (checked: at least one preemption).
// Finally every KV block must be free again. The prompts and their continuations must fit in 5 blocks
// (tests/python/family_fixture.py's 5, 17, 33 and 40 tokens, 32 steps do).
EngineScenarioResult RunEngineScenario(std::unique_ptr<model::LoadedModel> model, const ModelReference& reference);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_ENGINE_SCENARIO_H_
