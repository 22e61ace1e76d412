// The C++ loader and operators run the serving scenario on a package exported by the Python exporter, and
// match the Python full-recompute reference.
#include "worker/model/loaded_model.h"

#include <torch/cuda.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/model_scenario.h"
#include "tests/support/tokenizer_files.h"
#include "worker/model/model_manifest.h"

namespace llmc::model {
namespace {

constexpr int64_t kBlockSize = 16;

TEST_CASE("loaded model: float32 logits match the full-recompute reference, greedy tokens identical for 32 steps",
          "[integration][model]") {
  const std::string dir = testing::ParityFixture("float32");
  auto model = LoadedModel::Load(dir + "/package", {"cpu", ""});
  REQUIRE(model.ok());
  CHECK((*model)->manifest().name == "tiny-parity");
  CHECK((*model)->dtype() == at::kFloat);
  testing::RunModelScenario(**model, testing::LoadModelReference(dir), 1e-4, /*teacher_forcing=*/false);
}

TEST_CASE("loaded model: unpacked weights (the composite operators CUDA runs) match the reference too",
          "[integration][model]") {
  const std::string dir = testing::ParityFixture("float32");
  LoadOptions options{"cpu", ""};
  options.pack_weights = false;
  auto model = LoadedModel::Load(dir + "/package", options);
  REQUIRE(model.ok());
  testing::RunModelScenario(**model, testing::LoadModelReference(dir), 1e-4, /*teacher_forcing=*/false);
}

TEST_CASE("loaded model: the frozen module gives the same bits as the package's own graphs", "[integration][model]") {
  for (const char* dtype : {"float32", "bfloat16"}) {
    for (const char* quantization : {"", "int4"}) {
      CAPTURE(dtype, quantization);
      const std::string dir = testing::ParityFixture(dtype);
      LoadOptions frozen_options{"cpu", ""};
      frozen_options.quantization = quantization;
      LoadOptions unfrozen_options = frozen_options;
      unfrozen_options.freeze_graphs = false;
      const testing::ModelReference reference = testing::LoadModelReference(dir);
      const auto frozen = testing::LoadModelOrFail(dir + "/package", frozen_options);
      const auto unfrozen = testing::LoadModelOrFail(dir + "/package", unfrozen_options);
      // Frozen: no attribute reads, the layers inlined, and o_proj takes the attention's output as it lies.
      CHECK(frozen->StepGraphNodes("prim::GetAttr") == 0);
      CHECK(frozen->StepGraphNodes("prim::CallMethod") == 0);
      CHECK(frozen->StepGraphNodes("aten::reshape") == 0);
      CHECK(frozen->StepGraphNodes("llmc::paged_attention") == 2);
      CHECK(unfrozen->StepGraphNodes("prim::GetAttr") > 0);
      const std::vector<at::Tensor> want = testing::ScenarioLogits(*unfrozen, reference);
      const std::vector<at::Tensor> got = testing::ScenarioLogits(*frozen, reference);
      REQUIRE(got.size() == want.size());
      REQUIRE(!got.empty());
      for (size_t i = 0; i < got.size(); ++i) CHECK(at::equal(got[i], want[i]));
    }
  }
}

TEST_CASE("loaded model: bfloat16 logits stay within 3e-2 of the bfloat16 reference", "[integration][model]") {
  const std::string dir = testing::ParityFixture("bfloat16");
  auto model = LoadedModel::Load(dir + "/package", {"cpu", ""});
  REQUIRE(model.ok());
  CHECK((*model)->dtype() == at::kBFloat16);
  testing::RunModelScenario(**model, testing::LoadModelReference(dir), 3e-2, /*teacher_forcing=*/true);
}

TEST_CASE("loaded model: a float32 package can be served in bfloat16", "[integration][model]") {
  const std::string dir = testing::ParityFixture("float32");
  auto model = LoadedModel::Load(dir + "/package", {"cpu", "bfloat16"});
  REQUIRE(model.ok());
  CHECK((*model)->dtype() == at::kBFloat16);
  CHECK((*model)->KvCacheBlockBytes(16) == 2 * 2 * 16 * 2 * 32 * 2);
  testing::RunModelScenario(**model, testing::LoadModelReference(dir), 5e-2, /*teacher_forcing=*/true);
}

std::string CopyPackage(const std::string& from) {
  const std::string to = testing::MakeTempDir("llmc-package");
  std::filesystem::copy(from, to,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  return to;
}

void EditManifest(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json manifest;
  {
    std::ifstream in(dir + "/llmc-model.json");
    in >> manifest;
  }
  edit(manifest);
  std::ofstream(dir + "/llmc-model.json") << manifest.dump(2);
}

TEST_CASE("loaded model: corrupt or mismatched packages give the expected error", "[integration][model]") {
  const std::string good = testing::ParityFixture("float32") + "/package";
  const auto error = [](const std::string& dir, LoadOptions options = {"cpu", ""}) {
    auto model = LoadedModel::Load(dir, options);
    REQUIRE_FALSE(model.ok());
    return model.status();
  };

  CHECK(error("/nonexistent/package").code() == absl::StatusCode::kNotFound);

  std::string dir = CopyPackage(good);
  std::filesystem::remove(dir + "/model.pt");
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("no model.pt"));

  dir = CopyPackage(good);
  std::filesystem::resize_file(dir + "/model.pt", 4096);
  auto status = error(dir);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("corrupt or not TorchScript"));

  dir = CopyPackage(good);
  // One past the newest this worker reads.
  EditManifest(dir, [](nlohmann::json& m) { m["format_version"] = kManifestFormatVersion + 1; });
  status = error(dir);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(status.message()),
             Catch::Contains(absl::StrCat("format version ", kManifestFormatVersion + 1, " is not supported")));

  // Version 5 had no embeddings: such a package still loads, and serves none.
  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) {
    m["format_version"] = 5;
    m.erase("embedding_pooling");
  });
  auto version5 = model::LoadedModel::Load(dir, {"cpu", ""});
  REQUIRE(version5.ok());
  CHECK_FALSE((*version5)->serves_embeddings());

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["embedding_pooling"] = "max"; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("embedding_pooling 'max' is not supported"));

  // served_quantization names how an int8 package is served by default; this package's weights are float.
  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["served_quantization"] = "w4a16"; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("served_quantization 'w4a16' is not supported"));
  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["served_quantization"] = "w8a16"; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("served_quantization 'w8a16' needs int8 weights"));

  // Older packages call per-projection operators the fused kernels replaced (2), have no top-logits step
  // (3) or pass no weight scales (4): a clear re-export hint.
  for (const int old_version : {2, 3, 4}) {
    dir = CopyPackage(good);
    EditManifest(dir, [old_version](nlohmann::json& m) { m["format_version"] = old_version; });
    status = error(dir);
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(status.message()),
               Catch::Contains(absl::StrCat("format version ", old_version, " is not supported")));
    CHECK_THAT(std::string(status.message()), Catch::Contains("re-export it with tools/export_model.py"));
  }

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["format_version"] = 0; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("format version 0 is not supported"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["num_layers"] = 3; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("model.pt has no parameter model.layers.2"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["num_layers"] = 1; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("more layers than the manifest"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["num_kv_heads"] = 4; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("self_attn.qkv_proj.weight is [256, 128]"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["dtype"] = "float16"; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("unsupported dtype 'float16'"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m.erase("hidden_size"); });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("'hidden_size' must be a positive integer"));

  CHECK_THAT(std::string(error(good, {"cpu", "int8"}).message()), Catch::Contains("unsupported dtype 'int8'"));
  if (!torch::cuda::is_available()) {
    CHECK(error(good, {"cuda", ""}).code() == absl::StatusCode::kFailedPrecondition);
  }
}

TEST_CASE("loaded model: bad batches are INVALID_ARGUMENT and the model keeps working", "[integration][model]") {
  auto model = LoadedModel::Load(testing::ParityFixture("float32") + "/package", {"cpu", ""});
  REQUIRE(model.ok());
  at::Tensor cache = (*model)->AllocateKvCache(4, kBlockSize).value();
  ForwardBatch bad{at::tensor({1, 2}, at::kLong), at::tensor({0, 1}, at::kLong), at::tensor({0, 999}, at::kLong),
                   at::zeros({1, 1}, at::kInt),   at::tensor({2}, at::kInt),     at::tensor({0, 2}, at::kInt),
                   at::tensor({1}, at::kLong)};
  auto result = (*model)->Forward(bad, cache);
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("slot outside the cache"));
  ForwardBatch good = bad;
  good.slot_mapping = at::tensor({0, 1}, at::kLong);
  auto logits = (*model)->Forward(good, cache);
  REQUIRE(logits.ok());
  CHECK(logits->sizes() == at::IntArrayRef({1, 512}));
  CHECK((*model)->AllocateKvCache(0, 16).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llmc::model
