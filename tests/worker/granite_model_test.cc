// Granite 3: checkpoints written in Hugging Face's layout (embedding, residual, attention and logit multipliers;
// tied and untied heads) and exported by tools/export_model.py run on the C++ loader and operators, and match the
// independent forward of the same folder (tests/python/granite_reference.py, by make_granite_fixture.py). The
// export folds the multipliers into the weights and the attention scale, so these packages run a Llama graph.
#include <ATen/ATen.h>

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
std::string GraniteFixture(const std::string& dtype, bool tied) {
  static std::mutex mu;
  static std::map<std::string, std::string>* made = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = absl::StrCat(dtype, tied ? "-tied" : "-untied");
  std::string& dir = (*made)[key];
  if (dir.empty()) {
    const std::string out = testing::MakeTempDir("llmc-granite-" + key);
    std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tests/python/make_granite_fixture.py", "--out",
                                     out, "--dtype", dtype};
    if (!tied) args.push_back("--untied");
    const testing::CommandResult result = testing::RunCommand(LLMC_PYTHON, args, absl::Seconds(240));
    if (result.exit_code != 0) throw std::runtime_error("make_granite_fixture.py failed:\n" + result.output);
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
      auto model = LoadOrFail(dir + "/package", options);
      CHECK(model->manifest().architecture == "granite");
      CHECK(model->manifest().tie_word_embeddings == tied);
      const double difference = testing::RunModelScenario(*model, reference, 1e-4, /*teacher_forcing=*/false);
      WARN("granite float32 " << (tied ? "tied" : "untied") << (packed ? " packed" : " composite")
                              << ": largest logit difference " << difference << " (logits up to "
                              << LargestLogit(reference) << ")");
    }
  }
}

TEST_CASE("granite model: bfloat16 logits stay within 3% of the largest logit of the bfloat16 reference",
          "[integration][model]") {
  const std::string dir = GraniteFixture("bfloat16", /*tied=*/true);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  auto model = LoadOrFail(dir + "/package", {"cpu", ""});
  CHECK(model->dtype() == at::kBFloat16);
  const double bound = 3e-2 * LargestLogit(reference);
  const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
  WARN("granite bfloat16: largest logit difference " << difference << " (bound " << bound << ")");
}

TEST_CASE("granite model: int8 weights quantized at load stay within 5% of the largest logit", "[integration][model]") {
  const std::string dir = GraniteFixture("float32", /*tied=*/true);
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  const double bound = 5e-2 * LargestLogit(reference);
  auto model = LoadOrFail(dir + "/package", {"cpu", "", "int8"});
  const double difference = testing::RunModelScenario(*model, reference, bound, /*teacher_forcing=*/true);
  WARN("granite int8 at load: largest logit difference " << difference << " (bound " << bound << ")");
}

}  // namespace
}  // namespace llmc::model
