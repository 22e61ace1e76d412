// int4 packages and int4 quantization at load through the C++ loader: the two ways in give the same model
// bit for bit, the composite operators on the unpacked weights agree with the packed kernels, int4 stays near
// the bfloat16 model it came from, and what is not supported is refused by name.
// libtorch's headers (through loaded_model.h) define glog's CHECK; Catch's, included after, must win.
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/loaded_model.h"
// (keep this order)
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/model_scenario.h"
#include "tests/support/package_manifest.h"
#include "tests/support/quantization_quality.h"
#include "tests/support/tokenizer_files.h"

namespace llmc::model {
namespace {

// tools/export_model.py --random --preset tiny with `flags`, into a fresh folder; the package path.
std::string ExportTiny(const std::vector<std::string>& flags) {
  const std::string out = testing::MakeTempDir("llmc-int4") + "/package";
  std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py",
                                   "--random",
                                   "--preset",
                                   "tiny",
                                   "--seed",
                                   "5",
                                   "--dtype",
                                   "bfloat16",
                                   "--tokenizer",
                                   testing::TokenizerJsonPath("qwen3"),
                                   "--out",
                                   out};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto result = testing::RunCommand(LLMC_PYTHON, args, absl::Seconds(240));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return out;
}

TEST_CASE("int4 model: an exported int4 package and int4 at load give the same logits, near bfloat16",
          "[integration][model][int4]") {
  const std::string bf16 = ExportTiny({});
  auto plain = testing::LoadModelOrFail(bf16, {"cpu", ""});
  const std::vector<int64_t> tokens = {1, 7, 42, 99, 300, 511, 3, 8, 150, 77, 2, 400, 12, 13, 14, 15, 16, 17, 18};
  for (const int64_t group_size : {128, 32}) {
    INFO("group size " << group_size);
    const std::vector<std::string> flags =
        group_size == 128 ? std::vector<std::string>{"--quantize", "int4"}  // 128: the default
                          : std::vector<std::string>{"--quantize", "int4", "--group-size", std::to_string(group_size)};
    const std::string int4 = ExportTiny(flags);
    const nlohmann::json manifest = testing::ReadPackageManifest(int4);
    CHECK(manifest["quantization"] == "int4");
    CHECK(manifest["quantization_group_size"] == group_size);
    CHECK(manifest["format_version"] == kInt4ManifestFormatVersion);
    auto exported = testing::LoadModelOrFail(int4, {"cpu", ""});
    CHECK(exported->manifest().quantization == "int4");
    CHECK(exported->manifest().quantization_group_size == group_size);
    // --quantization=int4 at load (group size 0 means 128).
    auto at_load = testing::LoadModelOrFail(bf16, {"cpu", "", "int4", group_size == 128 ? 0 : group_size});
    CHECK(at_load->manifest().quantization == "int4");
    CHECK(at_load->manifest().quantization_group_size == group_size);
    // Same quantizer (Python and C++), same kernels: the same logits, bit for bit.
    const auto same = testing::MeasureQuantizationQuality(*exported, *at_load, tokens, 8);
    CHECK(same.max_kl == 0.0);
    CHECK(same.top1_agreement == 1.0);
    // The composite operators on the unpacked int4 weights agree with the packed kernels up to the kernels'
    // int16 activations.
    LoadOptions unpacked{"cpu", ""};
    unpacked.pack_weights = false;
    const auto close =
        testing::MeasureQuantizationQuality(*testing::LoadModelOrFail(int4, unpacked), *exported, tokens, 8);
    CHECK(close.max_kl < 1e-3);
    // And int4 stays near the bfloat16 weights it came from (4 bits: ~18 times int8's step).
    const auto quality = testing::MeasureQuantizationQuality(*plain, *exported, tokens, 8);
    INFO("int4 against bfloat16: mean KL " << quality.mean_kl << " nats, max " << quality.max_kl << ", top-1 "
                                           << quality.top1_agreement);
    CHECK(quality.mean_kl > 0.0);  // it did quantize
    CHECK(quality.mean_kl < 0.1);
    CHECK(quality.top1_agreement >= 0.6);
  }
}

TEST_CASE("int4 model: w4a16 and w4a8 fix the activations of the same int4 weights and say so",
          "[integration][model][int4]") {
  const std::string int4 = ExportTiny({"--quantize", "int4"});
  const std::vector<int64_t> tokens = {1, 7, 42, 99, 300, 511, 3, 8, 150, 77, 2, 400, 12, 13, 14, 15, 16, 17, 18};
  auto w4a16 = testing::LoadModelOrFail(int4, {"cpu", "", "w4a16"});
  CHECK(w4a16->manifest().quantization == "w4a16");
  if (!cpu::HasByteActivationKernel()) {  // the active path: the portable suite forces one without it
    const auto refused = LoadedModel::Load(int4, {"cpu", "", "w4a8"});
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(std::string(refused.status().message()), Catch::Contains("w4a8 needs AVX512-VNNI"));
    return;
  }
  auto w4a8 = testing::LoadModelOrFail(int4, {"cpu", "", "w4a8"});
  CHECK(w4a8->manifest().quantization == "w4a8");
  // The same weights; only the activations' rounding differs (bytes against int16).
  const auto quality = testing::MeasureQuantizationQuality(*w4a16, *w4a8, tokens, 8);
  INFO("w4a8 against w4a16: mean KL " << quality.mean_kl << ", max " << quality.max_kl);
  CHECK(quality.mean_kl > 0.0);
  CHECK(quality.max_kl < 0.05);
}

TEST_CASE("int4 model: what int4 does not support is refused by name", "[integration][model][int4]") {
  const std::string bf16 = ExportTiny({});
  const std::string int4 = ExportTiny({"--quantize", "int4", "--group-size", "64"});
  const auto error = [](const std::string& dir, const LoadOptions& options) {
    auto model = LoadedModel::Load(dir, options);
    REQUIRE_FALSE(model.ok());
    return std::string(model.status().message());
  };
  CHECK_THAT(error(int4, {"cpu", "", "int8"}), Catch::Contains("holds int4 weights"));
  CHECK_THAT(error(int4, {"cpu", "", "none"}), Catch::Contains("holds int4 weights"));
  CHECK_THAT(error(int4, {"cpu", "", "w8a8"}), Catch::Contains("holds int4 weights"));
  CHECK_THAT(error(bf16, {"cpu", "", "int4", 256}), Catch::Contains("int4 group size 256 is not supported"));
  CHECK(testing::LoadModelOrFail(int4, {"cpu", "", "int4"})->manifest().quantization_group_size == 64);

  const auto edit_manifest = [](const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    const std::string copy = testing::MakeTempDir("llmc-int4-edit");
    std::filesystem::copy(dir, copy, std::filesystem::copy_options::recursive);
    nlohmann::json manifest = testing::ReadPackageManifest(copy);
    edit(manifest);
    std::ofstream(copy + "/llmc-model.json") << manifest.dump(2);
    return copy;
  };
  // An older worker's newest version: int4 packages are refused by it.
  CHECK_THAT(error(edit_manifest(int4, [](nlohmann::json& m) { m["format_version"] = 8; }), {"cpu", ""}),
             Catch::Contains("int4 weights need format_version 9"));
  CHECK_THAT(error(edit_manifest(int4, [](nlohmann::json& m) { m["quantization_group_size"] = 32; }), {"cpu", ""}),
             Catch::Contains("with group size 32 needs float32"));
  CHECK_THAT(error(edit_manifest(int4, [](nlohmann::json& m) { m["quantization"] = "int8"; }), {"cpu", ""}),
             Catch::Contains("but the manifest implies"));

  // The exporter refuses group sizes int4 does not take.
  const auto result =
      testing::RunCommand(LLMC_PYTHON,
                          {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py", "--random", "--preset", "tiny",
                           "--tokenizer", testing::TokenizerJsonPath("qwen3"), "--out",
                           testing::MakeTempDir("llmc-int4-bad") + "/p", "--quantize", "int4", "--group-size", "256"},
                          absl::Seconds(240));
  CHECK(result.exit_code != 0);
  CHECK_THAT(result.output, Catch::Contains("unsupported int4 group size 256"));
}

}  // namespace
}  // namespace llmc::model
