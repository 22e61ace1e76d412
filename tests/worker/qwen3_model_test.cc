// Qwen3 (dense): checkpoints written in Hugging Face's layout (QK-norm, head_dim apart from hidden_size / heads,
// untied and tied heads) and exported by tools/export_model.py run on the C++ loader and operators, and match the
// independent forward of the same folder (tests/python/qwen3_reference.py, by make_qwen3_fixture.py).
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/engine_scenario.h"
#include "tests/support/model_scenario.h"
#include "worker/model/loaded_model.h"

namespace llmc::model {
namespace {

// The checkpoint, its package and the reference (tests/python/make_qwen3_fixture.py), made once per variant.
std::string Qwen3Fixture(const std::string& dtype, bool tied, const std::string& quantize = "none") {
  std::vector<std::string> args = {"--dtype", dtype, "--quantize", quantize};
  if (tied) args.push_back("--tied");
  return testing::FamilyFixture("make_qwen3_fixture.py", args);
}

TEST_CASE(
    "qwen3 model: float32 packages of Hugging Face checkpoints match the independent reference, greedy "
    "identical for 32 steps",
    "[integration][model]") {
  for (const bool tied : {false, true}) {
    const std::string dir = Qwen3Fixture("float32", tied);
    const testing::ModelReference reference = testing::LoadModelReference(dir);
    // The kernels on packed weights, and the composite operators CUDA runs.
    for (const bool packed : {true, false}) {
      INFO((tied ? "tied" : "untied") << (packed ? ", packed weights" : ", composite operators"));
      LoadOptions options{"cpu", ""};
      options.pack_weights = packed;
      auto model = testing::LoadModelOrFail(dir + "/package", options);
      CHECK(model->manifest().architecture == "qwen3");
      CHECK(model->manifest().head_dim == 32);
      CHECK(model->manifest().tie_word_embeddings == tied);
      const double difference = testing::RunModelScenario(*model, reference, 1e-4, /*teacher_forcing=*/false);
      WARN("qwen3 float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                            << ": largest logit difference " << difference << " (logits up to "
                            << testing::LargestLogit(reference) << ")");
      // Through the engine: alone, a prefix-cache hit, and a batch under preemption, greedy identical.
      const testing::EngineScenarioResult engine = testing::RunEngineScenario(std::move(model), reference);
      WARN("qwen3 float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                            << " through the engine: " << engine.num_preemptions
                            << " preemptions, prefix-cache hits of " << engine.repeat_cached_tokens << " and "
                            << engine.extend_cached_tokens << " prompt tokens");
    }
  }
}

TEST_CASE("qwen3 model: bfloat16 logits stay within 3% of the largest logit of the bfloat16 reference",
          "[integration][model]") {
  const std::string dir = Qwen3Fixture("bfloat16", /*tied=*/false);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  auto model = testing::LoadModelOrFail(dir + "/package", {"cpu", ""});
  CHECK(model->dtype() == at::kBFloat16);
  const double bound = 3e-2 * testing::LargestLogit(reference);
  const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
  WARN("qwen3 bfloat16: largest logit difference " << difference << " (bound " << bound << ")");
}

TEST_CASE("qwen3 model: int8 weights, exported or quantized at load, stay within 5% of the largest logit",
          "[integration][model]") {
  // The float32 reference of the same checkpoint: int8 rounding is the only difference.
  const testing::ModelReference reference = testing::LoadModelReference(Qwen3Fixture("float32", /*tied=*/true));
  const double bound = 5e-2 * testing::LargestLogit(reference);
  const std::string exported = Qwen3Fixture("float32", /*tied=*/true, "int8") + "/package";
  const std::string plain = Qwen3Fixture("float32", /*tied=*/true) + "/package";
  for (const auto& [package, quantization] :
       std::vector<std::pair<std::string, std::string>>{{exported, ""}, {exported, "w8a8"}, {plain, "int8"}}) {
    INFO(package << " served as " << (quantization.empty() ? "it is" : quantization));
    auto model = testing::LoadModelOrFail(package, {"cpu", "", quantization});
    CHECK(model->manifest().quantization == (quantization.empty() ? "int8" : quantization));
    const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
    WARN("qwen3 int8 (" << (quantization.empty() ? "exported" : quantization) << "): largest logit difference "
                        << difference << " (bound " << bound << ")");
  }
}

TEST_CASE("qwen3 model: a package said to be qwen3 without the q/k norm weights is refused at load",
          "[integration][model]") {
  const std::string dir = testing::MakeTempDir("llmc-qwen3-mismatch");
  std::filesystem::copy(testing::ParityFixture("float32") + "/package", dir,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  nlohmann::json manifest;
  std::ifstream(dir + "/llmc-model.json") >> manifest;
  manifest["architecture"] = "qwen3";
  manifest["format_version"] = 7;
  std::ofstream(dir + "/llmc-model.json") << manifest.dump(2);
  const auto model = LoadedModel::Load(dir, {"cpu", ""});
  REQUIRE_FALSE(model.ok());
  CHECK_THAT(std::string(model.status().message()),
             Catch::Contains("model.pt has no parameter model.layers.0.self_attn.q_norm.weight"));
}

}  // namespace
}  // namespace llmc::model
