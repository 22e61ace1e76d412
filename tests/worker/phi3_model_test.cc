// Phi-3 / Phi-4-mini (model_type phi3): checkpoints written in Hugging Face's layout (fused qkv_proj and
// gate_up_proj, partial rotary 0.75, LongRoPE with its attention factor; untied and tied heads) and exported by
// tools/export_model.py run on the C++ loader and operators, and match the independent forward of the same folder
// (tests/python/phi3_reference.py, by make_phi3_fixture.py).
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"
#include "tests/support/model_scenario.h"
#include "worker/model/loaded_model.h"

namespace llmc::model {
namespace {

// The checkpoint, its package and the reference, made once per test process and variant.
std::string Phi3Fixture(const std::string& dtype, bool tied) {
  static std::mutex mu;
  static std::map<std::string, std::string>* made = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = absl::StrCat(dtype, tied ? "-tied" : "-untied");
  std::string& dir = (*made)[key];
  if (dir.empty()) {
    const std::string out = testing::MakeTempDir("llmc-phi3-" + key);
    std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tests/python/make_phi3_fixture.py", "--out", out,
                                     "--dtype", dtype};
    if (tied) args.push_back("--tied");
    const testing::CommandResult result = testing::RunCommand(LLMC_PYTHON, args, absl::Seconds(240));
    if (result.exit_code != 0) throw std::runtime_error("make_phi3_fixture.py failed:\n" + result.output);
    dir = out;
  }
  return dir;
}

double LargestLogit(const testing::ModelReference& reference) {
  double largest = 0;
  for (const at::Tensor& logits : reference.logits) largest = std::max(largest, logits.abs().max().item<double>());
  return largest;
}

std::unique_ptr<LoadedModel> LoadOrFail(const std::string& package, const LoadOptions& options) {
  auto model = LoadedModel::Load(package, options);
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  return std::move(*model);
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
      auto model = LoadOrFail(dir + "/package", options);
      CHECK(model->manifest().architecture == "phi3");
      CHECK(model->manifest().head_dim == 32);
      // LongRoPE is served with its short factors: the context stops at original_max_position_embeddings.
      CHECK(model->manifest().max_context_length == 128);
      CHECK(model->manifest().tie_word_embeddings == tied);
      const double difference = testing::RunModelScenario(*model, reference, 1e-4, /*teacher_forcing=*/false);
      WARN("phi3 float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                           << ": largest logit difference " << difference << " (logits up to "
                           << LargestLogit(reference) << ")");
    }
  }
}

TEST_CASE("phi3 model: bfloat16 logits stay within 3% of the largest logit of the bfloat16 reference",
          "[integration][model]") {
  const std::string dir = Phi3Fixture("bfloat16", /*tied=*/false);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  auto model = LoadOrFail(dir + "/package", {"cpu", ""});
  CHECK(model->dtype() == at::kBFloat16);
  const double bound = 3e-2 * LargestLogit(reference);
  const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
  WARN("phi3 bfloat16: largest logit difference " << difference << " (bound " << bound << ")");
}

}  // namespace
}  // namespace llmc::model
