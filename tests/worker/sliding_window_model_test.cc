// Per-layer attention windows end to end: a Mistral checkpoint with a sliding window of 24 positions (blocks of
// 16), written in Hugging Face's layout and exported by tools/export_model.py, runs on the C++ loader and
// kernels and matches the independent windowed forward of the same folder (tests/python/mistral_reference.py, by
// make_mistral_fixture.py): over the paged scenario, and through the engine with prompts prefilled in chunks
// across the window's edge and a prefix-cache hit, decoding well past the window.
#include <memory>
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/collecting_sink.h"
#include "tests/support/model_scenario.h"
#include "worker/engine/engine.h"
#include "worker/model/loaded_model.h"

namespace llmc::model {
namespace {

// The checkpoint, its package and the reference (tests/python/make_mistral_fixture.py), made once.
std::string MistralWindowFixture() { return testing::FamilyFixture("make_mistral_fixture.py", {}); }

TEST_CASE(
    "sliding window model: a Mistral package with a window of 24 serves its full context and matches the "
    "windowed reference, greedy identical for 32 steps",
    "[integration][model]") {
  const std::string dir = MistralWindowFixture();
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  for (const bool packed : {true, false}) {
    INFO((packed ? "packed weights" : "composite operators"));
    LoadOptions options{"cpu", ""};
    options.pack_weights = packed;
    auto model = LoadedModel::Load(dir + "/package", options);
    INFO(model.status().ToString());
    REQUIRE(model.ok());
    CHECK((*model)->manifest().max_context_length == 256);  // max_position_embeddings, not the window
    // Prompts of 5, 17, 33 and 40 tokens (the last in two chunks of 20, the second across the window's edge),
    // each decoding 32 tokens: every sequence ends past the window.
    const double difference = testing::RunModelScenario(**model, reference, 1e-4, /*teacher_forcing=*/false);
    WARN("mistral window 24 float32 " << (packed ? "packed" : "composite") << ": largest logit difference "
                                      << difference);
  }
}

TEST_CASE(
    "sliding window model: through the engine, chunked prefill across the window's edge and a prefix-cache hit "
    "give the reference's greedy tokens",
    "[integration][model][engine]") {
  const std::string dir = MistralWindowFixture();
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  engine::EngineOptions options;
  options.kv_cache_bytes = 16 << 20;
  options.block_size = 16;
  options.max_num_batched_tokens = 16;  // the 40-token prompt prefills in chunks of 16, 16 and 8
  options.max_running = 4;
  options.max_waiting = 16;
  options.enable_prefix_caching = true;
  auto engine = testing::StartParityEngine(dir + "/package", options);
  const std::vector<int32_t> expected = testing::ToIds(reference.continuations[3]);
  // The first run fills the prefix cache; the second finds the prompt's two full blocks (32 tokens) there and
  // computes only positions 32..39, whose windows reach back into the cached blocks.
  for (const int64_t cached : {0, 32}) {
    INFO("cached prompt tokens " << cached);
    auto sink = testing::SubmitCollecting(*engine, testing::ReferenceGreedyRequest(reference.prompts[3]));
    REQUIRE(sink->WaitDone());
    REQUIRE(sink->status().ok());
    CHECK(sink->usage().cached_prompt_tokens() == cached);
    CHECK(sink->choice(0).tokens == expected);
  }
  // The 33-token prompt next to a decoding sequence: a batch that mixes its chunks with decode rows.
  auto first = testing::SubmitCollecting(*engine, testing::ReferenceGreedyRequest(reference.prompts[1]));
  auto second = testing::SubmitCollecting(*engine, testing::ReferenceGreedyRequest(reference.prompts[2]));
  for (const auto& [sink, index] : {std::pair{first, 1}, std::pair{second, 2}}) {
    REQUIRE(sink->WaitDone());
    REQUIRE(sink->status().ok());
    CHECK(sink->choice(0).tokens == testing::ToIds(reference.continuations[index]));
  }
}

}  // namespace
}  // namespace llmc::model
