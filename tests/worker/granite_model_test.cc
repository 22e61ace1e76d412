// Granite 3: checkpoints written in Hugging Face's layout (embedding, residual, attention and logit multipliers;
// tied and untied heads) and exported by tools/export_model.py run on the C++ loader and operators, and match the
// independent forward of the same folder (tests/python/granite_reference.py, by make_family_fixture.py granite). The
// export folds the multipliers into the weights and the attention scale, so these packages run a Llama graph.
#include <ATen/ATen.h>

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
std::string GraniteFixture(const std::string& dtype, bool tied) {
  return testing::FamilyFixture("make_family_fixture.py",
                                {"granite", "--dtype", dtype, "--head", tied ? "tied" : "untied"});
}

TEST_CASE(
    "granite model: float32 packages of Hugging Face checkpoints with multipliers match the independent "
    "reference, greedy identical for 32 steps",
    "[integration][model]") {
  for (const bool tied : {true, false}) {
    const std::string dir = GraniteFixture("float32", tied);
    const testing::ModelReference reference = testing::LoadModelReference(dir);
    // The kernels on packed weights, and the composite operators CUDA runs.
    for (const bool packed : {true, false}) {
      INFO((tied ? "tied" : "untied") << (packed ? ", packed weights" : ", composite operators"));
      LoadOptions options{"cpu", ""};
      options.pack_weights = packed;
      auto model = testing::LoadModelOrFail(dir + "/package", options);
      CHECK(model->manifest().architecture == "granite");
      CHECK(model->manifest().tie_word_embeddings == tied);
      const double difference = testing::RunModelScenario(*model, reference, 1e-4, /*teacher_forcing=*/false);
      WARN("granite float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                              << ": largest logit difference " << difference << " (logits up to "
                              << testing::LargestLogit(reference) << ")");
      // Through the engine: alone, a prefix-cache hit, and a batch under preemption, greedy identical.
      const testing::EngineScenarioResult engine = testing::RunEngineScenario(std::move(model), reference);
      WARN("granite float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                              << " through the engine: " << engine.num_preemptions
                              << " preemptions, prefix-cache hits of " << engine.repeat_cached_tokens << " and "
                              << engine.extend_cached_tokens << " prompt tokens");
    }
  }
}

TEST_CASE("granite model: bfloat16 logits stay within 3% of the largest logit of the bfloat16 reference",
          "[integration][model]") {
  const std::string dir = GraniteFixture("bfloat16", /*tied=*/true);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  auto model = testing::LoadModelOrFail(dir + "/package", {"cpu", ""});
  CHECK(model->dtype() == at::kBFloat16);
  const double bound = 3e-2 * testing::LargestLogit(reference);
  const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
  WARN("granite bfloat16: largest logit difference " << difference << " (bound " << bound << ")");
}

TEST_CASE("granite model: int8 weights quantized at load stay within 5% of the largest logit", "[integration][model]") {
  const std::string dir = GraniteFixture("float32", /*tied=*/true);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  const double bound = 5e-2 * testing::LargestLogit(reference);
  auto model = testing::LoadModelOrFail(dir + "/package", {"cpu", "", "int8"});
  const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
  WARN("granite int8 at load: largest logit difference " << difference << " (bound " << bound << ")");
}

}  // namespace
}  // namespace llmc::model
