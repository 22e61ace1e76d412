// 4-bit checkpoints (GPTQ, AWQ, compressed-tensors; tests/python/int4_checkpoint.py writes them in each format's
// layout) exported as they are and served through the C++ loader: packages with zero points (format version 11)
// load, their packed kernels agree with the composite operators on the unpacked weights, symmetric checkpoints give
// version 9 packages, and a zero-point package that claims an older version is refused by name.
// libtorch's headers (through loaded_model.h) define glog's CHECK; Catch's, included after, must win.
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

namespace llmc::model {
namespace {

void Run(const std::vector<std::string>& args) {
  const auto result = testing::RunCommand(LLMC_PYTHON, args, absl::Seconds(240));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
}

// A checkpoint of tests/python/int4_checkpoint.py's tiny network in `format`, exported with `dtype`; the package.
std::string ExportCheckpoint(const std::string& format, bool asymmetric, const std::string& dtype,
                             bool act_order = false) {
  const std::string dir = testing::MakeTempDir("llmc-int4-checkpoint");
  std::vector<std::string> write = {std::string(LLMC_SOURCE_DIR) + "/tests/python/int4_checkpoint.py",
                                    "--out",
                                    dir + "/checkpoint",
                                    "--format",
                                    format,
                                    "--group-size",
                                    "32"};
  if (asymmetric) write.push_back("--asymmetric");
  if (act_order) write.push_back("--act-order");
  Run(write);
  Run({std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py", "--checkpoint", dir + "/checkpoint", "--out",
       dir + "/package", "--dtype", dtype});
  return dir + "/package";
}

TEST_CASE("int4 checkpoints: GPTQ, AWQ and compressed-tensors packages load, packed kernels match the composite",
          "[integration][model][int4]") {
  const std::vector<int64_t> tokens = {1, 7, 42, 99, 300, 383, 3, 8, 150, 77, 2, 200, 12, 13, 14, 15, 16, 17, 18};
  struct Case {
    std::string format;
    bool asymmetric;
    std::string dtype;
    bool act_order = false;
  };
  // Act-order packages gather the hidden state and the attention's output into each weight's input order
  // (tools/llmc_export/input_order.py): the graph the worker freezes and runs holds index_select there.
  for (const Case& c : {Case{"gptq", true, "float32"}, Case{"awq", true, "bfloat16"},
                        Case{"compressed-tensors", true, "float32"}, Case{"gptq", false, "float32"},
                        Case{"gptq", true, "bfloat16", true}, Case{"compressed-tensors", false, "float32", true}}) {
    INFO("format " << c.format << (c.asymmetric ? " asymmetric " : " symmetric ") << c.dtype
                   << (c.act_order ? " act-order" : ""));
    const std::string package = ExportCheckpoint(c.format, c.asymmetric, c.dtype, c.act_order);
    const nlohmann::json manifest = testing::ReadPackageManifest(package);
    CHECK(manifest["quantization"] == "int4");
    CHECK(manifest["format_version"] ==
          (c.asymmetric ? kInt4ZeroPointManifestFormatVersion : kInt4ManifestFormatVersion));
    auto packed = testing::LoadModelOrFail(package, {"cpu", ""});
    CHECK(packed->manifest().quantization == "int4");
    LoadOptions options{"cpu", ""};
    options.pack_weights = false;
    auto unpacked = testing::LoadModelOrFail(package, options);
    // The composite dequantizes (u - z) * scale exactly; the kernels differ by their quantized activations (int16,
    // or int8 where W4A8 is the default) and, in bfloat16, by rounding.
    const auto close = testing::MeasureQuantizationQuality(*unpacked, *packed, tokens, 8);
    INFO("packed against composite: mean KL " << close.mean_kl << ", max " << close.max_kl << ", top-1 agreement "
                                              << close.top1_agreement << ", largest flip " << close.max_flip_margin);
    CHECK(close.max_kl < 1e-2);
    // A random model's near-ties flip under any rounding (one run: 17 of 19 agreed, KL 2e-6): every choice that
    // differs must be one the composite found almost as likely as its own.
    CHECK(close.max_flip_margin < 0.05);
  }
}

TEST_CASE("int4 checkpoints: zero points under an older format version are refused by name",
          "[integration][model][int4]") {
  const std::string package = ExportCheckpoint("gptq", true, "float32");
  const std::string copy = testing::MakeTempDir("llmc-int4-checkpoint-edit");
  std::filesystem::copy(package, copy, std::filesystem::copy_options::recursive);
  nlohmann::json manifest = testing::ReadPackageManifest(copy);
  manifest["format_version"] = 10;
  std::ofstream(copy + "/llmc-model.json") << manifest.dump(2);
  auto model = LoadedModel::Load(copy, {"cpu", ""});
  REQUIRE_FALSE(model.ok());
  CHECK_THAT(std::string(model.status().message()), Catch::Contains("zero points, which need format_version 11"));
}

}  // namespace
}  // namespace llmc::model
