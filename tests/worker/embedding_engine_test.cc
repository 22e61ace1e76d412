// Embedding requests in the continuous-batching engine against the full-recompute reference
// (tests/python/make_parity_fixture.py): last-token and mean pooling, alone, prefilled in chunks, beside
// generations in the same batches, under preemption, and the refusals.
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/collecting_sink.h"
#include "tests/support/model_scenario.h"
#include "tests/support/wait.h"
#include "worker/engine/engine.h"

namespace llmc::engine {
namespace {

using testing::CollectingSink;
using testing::Float32ParityDir;
using testing::Float32ParityReference;
using testing::ReferenceGreedyRequest;
using testing::SmallParityEngineOptions;
using testing::StartParityEngine;
using testing::SubmitCollecting;
using testing::ToIds;

// The fixture's package with its manifest's embedding_pooling set to `pooling`.
std::string PackageWithPooling(const std::string& pooling) {
  const std::string dir = testing::MakeTempDir("llmc-embedding-" + pooling) + "/package";
  std::filesystem::copy(Float32ParityDir() + "/package", dir, std::filesystem::copy_options::recursive);
  nlohmann::json manifest;
  std::ifstream(dir + "/llmc-model.json") >> manifest;
  manifest["embedding_pooling"] = pooling;
  std::ofstream(dir + "/llmc-model.json") << manifest.dump(2);
  return dir;
}

GenerationRequest Embedding(const at::Tensor& prompt, Pooling pooling) {
  GenerationRequest request;
  request.request_id = "embedding";
  request.prompt_token_ids = ToIds(prompt);
  request.pooling = pooling;
  request.sampling.max_tokens = 0;
  return request;
}

// The sink's embedding equals `expected` (float32, unit length) to float32 rounding.
void CheckEmbedding(CollectingSink& sink, const at::Tensor& expected, int64_t prompt_tokens) {
  REQUIRE(sink.WaitDone());
  REQUIRE(sink.status().ok());
  const std::vector<float> got = sink.embedding();
  REQUIRE(static_cast<int64_t>(got.size()) == expected.numel());
  const at::Tensor actual = at::tensor(at::ArrayRef<float>(got));
  CHECK(actual.sub(expected).abs().max().item<float>() < 1e-4f);
  CHECK(std::abs(actual.norm().item<float>() - 1.0f) < 1e-5f);
  CHECK(sink.usage().prompt_tokens() == prompt_tokens);
  CHECK(sink.usage().completion_tokens() == 0);
  CHECK(sink.num_done_calls() == 1);
}

TEST_CASE("engine embeddings: last-token and mean pooling equal the reference alone, chunked and beside generations",
          "[integration][engine][embeddings]") {
  const auto& reference = Float32ParityReference();
  for (const Pooling pooling : {Pooling::kLast, Pooling::kMean}) {
    const bool mean = pooling == Pooling::kMean;
    INFO((mean ? "mean pooling" : "last-token pooling"));
    auto engine = StartParityEngine(PackageWithPooling(mean ? "mean" : "last"), SmallParityEngineOptions());
    const std::vector<at::Tensor>& expected = mean ? reference.mean_embeddings : reference.last_embeddings;

    for (size_t s = 0; s < reference.prompts.size(); ++s) {
      INFO("prompt " << s << " alone");
      auto sink = SubmitCollecting(*engine, Embedding(reference.prompts[s], pooling));
      CheckEmbedding(*sink, expected[s], reference.prompts[s].numel());
    }

    // Two generations decode while every prompt is embedded in the same steps (prompts of 33 and 40
    // tokens in chunks of the 24-token budget); the generations still equal the reference.
    std::vector<std::shared_ptr<CollectingSink>> generations, embeddings;
    generations.push_back(SubmitCollecting(*engine, ReferenceGreedyRequest(reference.prompts[1])));
    REQUIRE(testing::WaitUntil([&] { return !generations[0]->choice(0).tokens.empty(); }, absl::Seconds(30)));
    for (size_t s = 0; s < reference.prompts.size(); ++s) {
      embeddings.push_back(SubmitCollecting(*engine, Embedding(reference.prompts[s], pooling)));
    }
    generations.push_back(SubmitCollecting(*engine, ReferenceGreedyRequest(reference.prompts[3])));
    for (size_t s = 0; s < reference.prompts.size(); ++s) {
      INFO("prompt " << s << " in a mixed batch");
      CheckEmbedding(*embeddings[s], expected[s], reference.prompts[s].numel());
    }
    for (size_t g = 0; g < generations.size(); ++g) {
      REQUIRE(generations[g]->WaitDone());
      REQUIRE(generations[g]->status().ok());
      CHECK(generations[g]->choice(0).tokens == ToIds(reference.continuations[g == 0 ? 1 : 3]));
      CHECK(generations[g]->embedding().empty());
    }
    CHECK(testing::WaitUntil([&] { return engine->Load().num_kv_blocks_used == 0; }, absl::Seconds(10)));
  }
}

TEST_CASE("engine embeddings: mean pooling starts over when a preempted prompt is recomputed",
          "[integration][engine][embeddings]") {
  const auto& reference = Float32ParityReference();
  EngineOptions options = SmallParityEngineOptions();
  auto probe = model::LoadedModel::Load(Float32ParityDir() + "/package", {"cpu", ""});
  REQUIRE(probe.ok());
  // 6 blocks of 16 tokens: two 40-token generations need 3 blocks each once they decode, so the embedding
  // prompts (3 blocks for 40 tokens) are preempted and readmitted.
  options.kv_cache_bytes = 6 * (*probe)->KvCacheBlockBytes(options.block_size);
  auto engine = StartParityEngine(PackageWithPooling("mean"), options);
  std::vector<std::shared_ptr<CollectingSink>> generations, embeddings;
  for (int round = 0; round < 3; ++round) {
    generations.push_back(SubmitCollecting(*engine, ReferenceGreedyRequest(reference.prompts[3])));
    embeddings.push_back(SubmitCollecting(*engine, Embedding(reference.prompts[3], Pooling::kMean)));
    embeddings.push_back(SubmitCollecting(*engine, Embedding(reference.prompts[2], Pooling::kMean)));
  }
  for (size_t e = 0; e < embeddings.size(); ++e) {
    INFO("embedding " << e);
    const size_t prompt = e % 2 == 0 ? 3 : 2;
    CheckEmbedding(*embeddings[e], reference.mean_embeddings[prompt], reference.prompts[prompt].numel());
  }
  for (auto& generation : generations) {
    REQUIRE(generation->WaitDone());
    CHECK(generation->choice(0).tokens == ToIds(reference.continuations[3]));
  }
  CHECK(engine->Load().num_preemptions > 0);
}

TEST_CASE("engine embeddings: refused without pooling in the package, with n > 1, or beyond the context",
          "[integration][engine][embeddings]") {
  const auto& reference = Float32ParityReference();
  {
    auto engine = StartParityEngine(PackageWithPooling("none"), SmallParityEngineOptions());
    auto sink = std::make_shared<CollectingSink>();
    const auto refused = engine->Submit(Embedding(reference.prompts[0], Pooling::kLast), sink);
    CHECK(absl::IsFailedPrecondition(refused.status()));
    CHECK_THAT(std::string(refused.status().message()), Catch::Contains("serves no embeddings"));
  }
  EngineOptions options = SmallParityEngineOptions();
  options.max_model_len = 32;
  auto engine = StartParityEngine(Float32ParityDir() + "/package", options);
  auto sink = std::make_shared<CollectingSink>();
  GenerationRequest two = Embedding(reference.prompts[0], Pooling::kLast);
  two.sampling.n = 2;
  CHECK(absl::IsInvalidArgument(engine->Submit(std::move(two), sink).status()));
  const auto too_long = engine->Submit(Embedding(reference.prompts[3], Pooling::kLast), sink);
  CHECK(absl::IsInvalidArgument(too_long.status()));
  CHECK_THAT(std::string(too_long.status().message()), Catch::Contains("maximum context length is 32"));
  // A prompt that fits exactly is served.
  CheckEmbedding(*SubmitCollecting(*engine, Embedding(reference.prompts[1], Pooling::kLast)),
                 reference.last_embeddings[1], reference.prompts[1].numel());
}

}  // namespace
}  // namespace llmc::engine
