// Phi-3 / Phi-4-mini (model_type phi3): checkpoints written in Hugging Face's layout (fused qkv_proj and
// gate_up_proj, partial rotary 0.75, LongRoPE with its attention factor; untied and tied heads) and exported by
// tools/export_model.py run on the C++ loader and operators, and match the independent forward of the same folder
// (tests/python/phi3_reference.py, by make_family_fixture.py phi3).
#include <string>
#include <utility>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/engine_scenario.h"
#include "tests/support/model_scenario.h"
#include "worker/model/loaded_model.h"

namespace llmc::model {
namespace {

// The checkpoint, its package and the reference (tests/python/make_family_fixture.py), made once per variant.
std::string Phi3Fixture(const std::string& dtype, bool tied, bool long_rope = false) {
  std::vector<std::string> args = {"phi3", "--dtype", dtype, "--head", tied ? "tied" : "untied"};
  if (long_rope) args.push_back("--long-rope");
  return testing::FamilyFixture("make_family_fixture.py", args);
}

TEST_CASE(
    "phi3 model: float32 packages of Hugging Face checkpoints (partial rotary, LongRoPE) match the independent "
    "reference, greedy identical for 32 steps",
    "[integration][model]") {
  for (const bool tied : {false, true}) {
    const std::string dir = Phi3Fixture("float32", tied);
    const testing::ModelReference reference = testing::LoadModelReference(dir);
    // The kernels on packed weights, and the composite operators CUDA runs.
    for (const bool packed : {true, false}) {
      INFO((tied ? "tied" : "untied") << (packed ? ", packed weights" : ", composite operators"));
      LoadOptions options{"cpu", ""};
      options.pack_weights = packed;
      auto model = testing::LoadModelOrFail(dir + "/package", options);
      CHECK(model->manifest().architecture == "phi3");
      CHECK(model->manifest().head_dim == 32);
      // LongRoPE is served with its short factors: the context stops at original_max_position_embeddings.
      CHECK(model->manifest().max_context_length == 128);
      CHECK(model->manifest().tie_word_embeddings == tied);
      const double difference = testing::RunModelScenario(*model, reference, 1e-4, /*teacher_forcing=*/false);
      WARN("phi3 float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                           << ": largest logit difference " << difference << " (logits up to "
                           << testing::LargestLogit(reference) << ")");
      // Through the engine: alone, a prefix-cache hit, and a batch under preemption, greedy identical.
      const testing::EngineScenarioResult engine = testing::RunEngineScenario(std::move(model), reference);
      WARN("phi3 float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                           << " through the engine: " << engine.num_preemptions << " preemptions, prefix-cache hits of "
                           << engine.repeat_cached_tokens << " and " << engine.extend_cached_tokens
                           << " prompt tokens");
    }
  }
}

TEST_CASE(
    "phi3 model: a package with LongRoPE's long factors serves the whole context and matches the reference on "
    "sequences longer than the original context",
    "[integration][model]") {
  // original_max_position_embeddings is 4: Hugging Face rotates every scenario sequence (5 tokens and more) with
  // the long factors, as the package does at every position.
  const std::string dir = Phi3Fixture("float32", /*tied=*/false, /*long_rope=*/true);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  auto model = testing::LoadModelOrFail(dir + "/package", {"cpu", ""});
  CHECK(model->manifest().max_context_length == 1024);
  const double difference = testing::RunModelScenario(*model, reference, 1e-4, /*teacher_forcing=*/false);
  WARN("phi3 float32 long factors: largest logit difference " << difference);
  const testing::EngineScenarioResult engine = testing::RunEngineScenario(std::move(model), reference);
  WARN("phi3 long factors through the engine: " << engine.num_preemptions << " preemptions, prefix-cache hits of "
                                                << engine.repeat_cached_tokens << " and " << engine.extend_cached_tokens
                                                << " prompt tokens");
}

TEST_CASE("phi3 model: bfloat16 logits stay within 3% of the largest logit of the bfloat16 reference",
          "[integration][model]") {
  const std::string dir = Phi3Fixture("bfloat16", /*tied=*/false);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  auto model = testing::LoadModelOrFail(dir + "/package", {"cpu", ""});
  CHECK(model->dtype() == at::kBFloat16);
  const double bound = 3e-2 * testing::LargestLogit(reference);
  const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
  WARN("phi3 bfloat16: largest logit difference " << difference << " (bound " << bound << ")");
}

}  // namespace
}  // namespace llmc::model
