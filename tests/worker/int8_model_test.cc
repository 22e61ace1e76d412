// int8 packages and quantization at load through the C++ loader: the two ways in give the same model, the
// composite (CUDA) path agrees with the kernels, w8a8 rounds the activations too and int8 chooses int16 or
// int8 activations by the batch, bad combinations are refused, and on the Qwen2-0.5B-shaped model int8
// stays close to bfloat16 over 512 positions of real text.
// libtorch's headers (through loaded_model.h) define glog's CHECK; Catch's, included after, must win.
#include "worker/model/loaded_model.h"
// (keep this order)
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/model_scenario.h"
#include "tests/support/quantization_quality.h"
#include "tests/support/tokenizer_files.h"
#include "worker/model/cpu/cpu_isa.h"

namespace llmc::model {
namespace {

// tools/export_model.py --random with `flags`, into a fresh folder; the package path.
std::string Export(const std::string& preset, const std::vector<std::string>& flags) {
  const std::string out = testing::MakeTempDir("llmc-int8") + "/package";
  std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py",
                                   "--random",
                                   "--preset",
                                   preset,
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

// 512 tokens of English prose (this repository's documentation) in the Qwen3 vocabulary.
std::vector<int64_t> RealTextTokens(int64_t count) {
  std::stringstream text;
  for (const char* doc : {"/docs/architecture.md", "/docs/engine.md", "/README.md"}) {
    text << std::ifstream(std::string(LLMC_SOURCE_DIR) + doc).rdbuf();
  }
  auto ids = testing::RealTokenizer("qwen3").Encode(text.str());
  REQUIRE(ids.ok());
  REQUIRE(static_cast<int64_t>(ids->size()) >= count);
  return std::vector<int64_t>(ids->begin(), ids->begin() + count);
}

TEST_CASE("int8 model: an exported int8 package and quantization at load give the same logits",
          "[integration][model][int8]") {
  const std::string bf16 = Export("tiny", {});
  const std::vector<int64_t> tokens = {1, 7, 42, 99, 300, 511, 3, 8, 150, 77, 2, 400, 12, 13, 14, 15, 16, 17, 18};
  for (const int64_t group_size : {0, 32}) {
    INFO("group size " << group_size);
    const std::string int8 = Export("tiny", {"--quantize", "int8", "--group-size", std::to_string(group_size)});
    auto exported = testing::LoadModelOrFail(int8, {"cpu", ""});
    CHECK(exported->manifest().quantization == "int8");
    CHECK(exported->manifest().quantization_group_size == group_size);
    auto at_load = testing::LoadModelOrFail(bf16, {"cpu", "", "int8", group_size});
    CHECK(at_load->manifest().quantization == "int8");
    auto plain = testing::LoadModelOrFail(bf16, {"cpu", ""});
    CHECK(plain->manifest().quantization == "none");
    // Same quantizer (Python and C++), same kernels: the same logits, bit for bit.
    const auto same = testing::MeasureQuantizationQuality(*exported, *at_load, tokens, 8);
    CHECK(same.max_kl == 0.0);
    CHECK(same.top1_agreement == 1.0);
    // The composite operators (what a CUDA worker runs) on the unpacked int8 weights agree with the kernels
    // up to the kernels' int16 activations.
    LoadOptions unpacked{"cpu", ""};
    unpacked.pack_weights = false;
    auto composite = testing::LoadModelOrFail(int8, unpacked);
    const auto close = testing::MeasureQuantizationQuality(
        *composite, *testing::LoadModelOrFail(int8, {"cpu", "", "w8a16"}), tokens, 8);
    CHECK(close.max_kl < 1e-3);
    // And int8 stays near the bfloat16 weights it came from.
    const auto quality = testing::MeasureQuantizationQuality(*plain, *exported, tokens, 8);
    CHECK(quality.mean_kl < 0.01);
    CHECK(quality.mean_kl > 0.0);  // it did quantize
  }
}

TEST_CASE("int8 model: w8a8 rounds the activations of the same int8 weights, int8 chooses by the batch",
          "[integration][model][int8]") {
  const std::string bf16 = Export("tiny", {});
  const std::string int8 = Export("tiny", {"--quantize", "int8"});
  const std::vector<int64_t> tokens = {1, 7, 42, 99, 300, 511, 3, 8, 150, 77, 2, 400, 12, 13, 14, 15, 16, 17, 18};
  auto w8a8 = testing::LoadModelOrFail(int8, {"cpu", "", "w8a8"});
  CHECK(w8a8->manifest().quantization == "w8a8");
  auto at_load = testing::LoadModelOrFail(bf16, {"cpu", "", "w8a8"});
  CHECK(at_load->manifest().quantization == "w8a8");
  CHECK(testing::MeasureQuantizationQuality(*w8a8, *at_load, tokens, 8).max_kl == 0.0);
  // Against int16 activations: close, but not the same (the activations did go through int8).
  auto w8a16 = testing::LoadModelOrFail(int8, {"cpu", "", "w8a16"});
  CHECK(w8a16->manifest().quantization == "w8a16");
  const auto against_w8a16 = testing::MeasureQuantizationQuality(*w8a16, *w8a8, tokens, 8);
  CHECK(against_w8a16.mean_kl < 0.01);
  CHECK(against_w8a16.max_kl > 0.0);
  // Served as int8 (the package's own setting), the kernels choose by the batch: steps of 4 rows run as
  // w8a16, one step of all 19 rows as w8a8 where a kernel multiplies int8 activations faster (AVX512-VNNI).
  auto by_batch = testing::LoadModelOrFail(int8, {"cpu", ""});
  CHECK(by_batch->manifest().quantization == "int8");
  CHECK(testing::MeasureQuantizationQuality(*w8a16, *by_batch, tokens, 4).max_kl == 0.0);
  const bool int8_kernel = cpu::ActiveCpuIsa() >= cpu::CpuIsa::kAvx512Vnni;
  const int64_t whole = static_cast<int64_t>(tokens.size());
  CHECK(testing::MeasureQuantizationQuality(int8_kernel ? *w8a8 : *w8a16, *by_batch, tokens, whole).max_kl == 0.0);
  auto plain = testing::LoadModelOrFail(bf16, {"cpu", ""});
  CHECK(testing::MeasureQuantizationQuality(*plain, *w8a8, tokens, 8).mean_kl < 0.01);

  LoadOptions unpacked{"cpu", "", "w8a8"};
  unpacked.pack_weights = false;
  auto refused = LoadedModel::Load(int8, unpacked);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("w8a8 (int8 activations) runs on the CPU"));
  unpacked.quantization = "w8a16";
  refused = LoadedModel::Load(int8, unpacked);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("w8a16 (int16 activations) runs on the CPU"));
}

TEST_CASE("int8 model: a compressed-tensors int8 checkpoint is served with its own int8 weights",
          "[integration][model][int8]") {
  // llm-compressor's W8A8 (int8 tensors, a scale per row) and W8A16 (packed, groups of 32) layouts, random
  // weights, -128 among them (tests/python/int8_checkpoint.py); the exporter keeps them as they are.
  const std::vector<int64_t> tokens = {1, 7, 42, 99, 300, 383, 3, 8, 150, 77, 2, 200, 12, 13, 14, 15, 16, 17, 18};
  for (const auto& [flags, group_size] : std::vector<std::pair<std::vector<std::string>, int64_t>>{
           {{}, 0}, {{"--strategy", "group", "--group-size", "32", "--packed", "--w8a16"}, 32}}) {
    INFO("group size " << group_size);
    const std::string dir = testing::MakeTempDir("llmc-int8-checkpoint");
    std::vector<std::string> make = {std::string(LLMC_SOURCE_DIR) + "/tests/python/int8_checkpoint.py", "--out",
                                     dir + "/checkpoint"};
    make.insert(make.end(), flags.begin(), flags.end());
    auto result = testing::RunCommand(LLMC_PYTHON, make, absl::Seconds(240));
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    result = testing::RunCommand(LLMC_PYTHON,
                                 {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py", "--checkpoint",
                                  dir + "/checkpoint", "--out", dir + "/package", "--dtype", "bfloat16"},
                                 absl::Seconds(240));
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    auto kernels = testing::LoadModelOrFail(dir + "/package", {"cpu", "", "w8a16"});
    CHECK(kernels->manifest().quantization == "w8a16");
    CHECK(kernels->manifest().quantization_group_size == group_size);
    // A W8A16 checkpoint's package is served with 16-bit activations unless the worker is told otherwise;
    // a W8A8 one as int8, by the batch.
    const bool w8a16 = group_size != 0;
    CHECK(testing::LoadModelOrFail(dir + "/package", {"cpu", ""})->manifest().quantization ==
          (w8a16 ? "w8a16" : "int8"));
    CHECK(testing::LoadModelOrFail(dir + "/package", {"cpu", "", "int8"})->manifest().quantization == "int8");
    // The packed kernels against the composite operators on the same int8 weights (what a CUDA worker
    // runs): equal up to the kernels' int16 activations, -128 included.
    LoadOptions unpacked{"cpu", ""};
    unpacked.pack_weights = false;
    auto composite = testing::LoadModelOrFail(dir + "/package", unpacked);
    CHECK(composite->manifest().quantization == "int8");
    CHECK(testing::MeasureQuantizationQuality(*composite, *kernels, tokens, 8).max_kl < 1e-3);
    auto w8a8 = testing::LoadModelOrFail(dir + "/package", {"cpu", "", "w8a8"});
    CHECK(testing::MeasureQuantizationQuality(*composite, *w8a8, tokens, 8).mean_kl < 0.01);
  }
}

TEST_CASE("int8 model: bad quantization settings and mismatched packages are refused clearly",
          "[integration][model][int8]") {
  const std::string bf16 = Export("tiny", {});
  const std::string int8 = Export("tiny", {"--quantize", "int8"});
  const auto error = [](const std::string& dir, LoadOptions options) {
    auto model = LoadedModel::Load(dir, options);
    REQUIRE_FALSE(model.ok());
    CHECK(model.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(model.status().message());
  };
  CHECK_THAT(error(int8, {"cpu", "", "none"}), Catch::Contains("holds int8 weights"));
  CHECK_THAT(error(bf16, {"cpu", "", "int2"}), Catch::Contains("unknown quantization 'int2'"));
  CHECK_THAT(error(int8, {"cpu", "", "int4"}), Catch::Contains("int4 at load quantizes a bfloat16 or float32"));
  CHECK_THAT(error(bf16, {"cpu", "", "int8", 100}), Catch::Contains("int8 group size 100 is not supported"));
  // An int8 package stays int8 when asked for int8, and may run its activations in float32.
  auto float_activations = testing::LoadModelOrFail(int8, {"cpu", "float32", "int8"});
  CHECK(float_activations->dtype() == at::kFloat);

  const auto edit_manifest = [](const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    const std::string copy = testing::MakeTempDir("llmc-int8-edit");
    std::filesystem::copy(dir, copy, std::filesystem::copy_options::recursive);
    nlohmann::json manifest;
    std::ifstream(copy + "/llmc-model.json") >> manifest;
    edit(manifest);
    std::ofstream(copy + "/llmc-model.json") << manifest.dump(2);
    return copy;
  };
  CHECK_THAT(error(edit_manifest(bf16, [](nlohmann::json& m) { m["quantization"] = "int8"; }), {"cpu", ""}),
             Catch::Contains("but the manifest says quantization 'int8'"));
  CHECK_THAT(error(edit_manifest(int8, [](nlohmann::json& m) { m["quantization"] = "none"; }), {"cpu", ""}),
             Catch::Contains("but the manifest says quantization 'none'"));
  CHECK_THAT(error(edit_manifest(int8, [](nlohmann::json& m) { m["quantization_group_size"] = 64; }), {"cpu", ""}),
             Catch::Contains("with group size 64 needs float32"));
  CHECK_THAT(error(edit_manifest(bf16, [](nlohmann::json& m) { m["quantization"] = "int4"; }), {"cpu", ""}),
             Catch::Contains("int4 weights need format_version 9"));
}

TEST_CASE("int8 model: the Qwen2-0.5B-shaped model in int8 stays close to bfloat16 over 512 real tokens",
          "[integration][int8]") {
  const std::string bf16 = Export("qwen2-0.5b", {});
  auto reference = testing::LoadModelOrFail(bf16, {"cpu", ""});
  const std::vector<int64_t> tokens = RealTextTokens(512);
  for (const auto& [quantization, group_size] :
       std::vector<std::pair<std::string, int64_t>>{{"w8a16", 0}, {"w8a16", 128}, {"w8a8", 0}}) {
    auto quantized = testing::LoadModelOrFail(bf16, {"cpu", "", quantization, group_size});
    const auto quality = testing::MeasureQuantizationQuality(*reference, *quantized, tokens);
    INFO(quantization << ", group size " << group_size << ": mean KL " << quality.mean_kl << " nats, max "
                      << quality.max_kl << ", top-1 agreement " << quality.top1_agreement);
    CHECK(quality.positions == 512);
    // measured: 0.0008 (one scale per row), 0.0005 (groups of 128), 0.0011 (w8a8, one activation scale per row)
    CHECK(quality.mean_kl <= 0.01);
    // The issue asks for 95 %. A random model's next-token distributions are nearly flat (its top two logits
    // are close), so even bfloat16 rounding of the activations alone flips 3 % of its top-1 choices, and int8
    // weights flip 12-15 % (by seed) while moving the distributions by < 0.001 nats (llmc_quantization_bench prints
    // both). The bound below catches a broken quantizer or kernel (agreement near 0, KL of whole nats)
    // without claiming what this model cannot show.
    CHECK(quality.top1_agreement >= 0.75);
  }
}

// Qwen3 tokens of `docs`, renumbered through `ids` (each token id the first time it is seen gets the next
// number), so that a model trained on them needs only the vocabulary the text uses.
std::vector<int64_t> RenumberedDocTokens(const std::vector<std::string>& docs,
                                         std::unordered_map<int64_t, int64_t>& ids) {
  std::vector<int64_t> out;
  for (const std::string& doc : docs) {
    std::stringstream text;
    text << std::ifstream(std::string(LLMC_SOURCE_DIR) + doc).rdbuf();
    auto encoded = testing::RealTokenizer("qwen3").Encode(text.str());
    REQUIRE(encoded.ok());
    for (const int64_t id : *encoded) out.push_back(ids.emplace(id, static_cast<int64_t>(ids.size())).first->second);
  }
  return out;
}

// The trained model's packages (TrainAndExport).
struct TrainedPackages {
  std::string bf16, int8, int4_group128, int4_group32, int4_zero_point_group128, int4_zero_point_group32;
};

// tests/support/train_text_model.py on `training` for `steps` steps, exported into `dir` as bfloat16, int8 and int4
// (groups of 128 and of 32, symmetric and with zero points) packages.
TrainedPackages TrainAndExport(const std::string& dir, const std::vector<int64_t>& training, int64_t vocab_size,
                               int steps) {
  {
    std::ofstream tokens_file(dir + "/tokens.txt");
    for (const int64_t id : training) tokens_file << id << ' ';
  }
  const auto trained = testing::RunCommand(
      LLMC_PYTHON,
      {std::string(LLMC_SOURCE_DIR) + "/tests/support/train_text_model.py", "--tokens", dir + "/tokens.txt",
       "--vocab-size", std::to_string(vocab_size), "--tokenizer", testing::TokenizerJsonPath("qwen3"), "--steps",
       std::to_string(steps), "--out", dir + "/checkpoint"},
      absl::Seconds(600));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto export_package = [&](const std::string& name, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py",
                                     "--checkpoint",
                                     dir + "/checkpoint",
                                     "--dtype",
                                     "bfloat16",
                                     "--out",
                                     dir + "/" + name};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto result = testing::RunCommand(LLMC_PYTHON, args, absl::Seconds(240));
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    return dir + "/" + name;
  };
  return {export_package("bf16", {}),
          export_package("int8", {"--quantize", "int8"}),
          export_package("int4-g128", {"--quantize", "int4", "--group-size", "128"}),
          export_package("int4-g32", {"--quantize", "int4", "--group-size", "32"}),
          export_package("int4-zp-g128", {"--quantize", "int4", "--group-size", "128", "--int4-zero-point"}),
          export_package("int4-zp-g32", {"--quantize", "int4", "--group-size", "32", "--int4-zero-point"})};
}

TEST_CASE(
    "int8 model: a model trained on real text keeps 95 % of its top-1 choices in int8, 90 % in int4 within 0.05 "
    "nats (groups of 128 and 32, with and without zero points)",
    "[integration][int8]") {
  // The top-1 bound, on a model that predicts text: the Qwen2-0.5B-shaped random model above flips
  // its choices under any rounding. This one (tests/support/train_text_model.py: Qwen2 architecture, 2 layers
  // of 128, 300 steps of 2 windows of 512 tokens, about 30 s) learns a copy of this repository's documentation
  // and is judged on the first 512 tokens of four documents it did not see (2,048 positions: over one text of
  // 512 the int4 top-1 figure moved by 3 points with any change of rounding or libtorch). The copy is frozen
  // (tests/data/trained_model/): trained on the live documents, every edit to them gave another model, and the
  // int4 top-1 figure moved by up to 4 points from one to the next. Untrained, it predicts none of them
  // (accuracy 0, measured), so the accuracy bound shows that the training took.
  std::unordered_map<int64_t, int64_t> ids;
  const std::string corpus = "/tests/data/trained_model/";
  const std::vector<int64_t> training = RenumberedDocTokens(
      {corpus + "training-architecture.txt", corpus + "training-model-package.txt", corpus + "training-performance.txt",
       corpus + "training-endpoints.txt", corpus + "training-configuration.txt", corpus + "training-README.txt"},
      ids);
  std::vector<std::vector<int64_t>> held_out;
  for (const char* doc : {"held-out-engine.txt", "held-out-reliability.txt", "held-out-dispatch.txt",
                          "held-out-structured-outputs.txt"}) {
    held_out.push_back(RenumberedDocTokens({corpus + doc}, ids));
    REQUIRE(held_out.back().size() >= 512);
    held_out.back().resize(512);
  }
  const TrainedPackages packages =
      TrainAndExport(testing::MakeTempDir("llmc-int8-trained"), training, static_cast<int64_t>(ids.size()), 300);
  auto reference = testing::LoadModelOrFail(packages.bf16, {"cpu", ""});
  for (const std::string quantization : {"w8a16", "w8a8"}) {
    auto quantized = testing::LoadModelOrFail(packages.int8, {"cpu", "", quantization});
    const auto quality = testing::MeasureQuantizationQuality(*reference, *quantized, held_out);
    INFO(quantization << ": mean KL " << quality.mean_kl << " nats, max " << quality.max_kl << ", top-1 agreement "
                      << quality.top1_agreement << ", bfloat16's own next-token accuracy " << quality.reference_accuracy
                      << ", vocabulary " << ids.size());
    CHECK(quality.positions == 2048);
    CHECK(quality.reference_accuracy >= 0.1);  // it did learn the text; measured 0.16-0.17
    // measured: mean KL 0.00003-0.00005 (w8a16), 0.0001 (w8a8); top-1 agreement 99.4-99.8 % and 98.2-99.2 %
    CHECK(quality.mean_kl <= 0.01);
    CHECK(quality.top1_agreement >= 0.95);
  }
  // int4, the bounds: mean KL(bfloat16 || int4) <= 0.05 nats, top-1 agreement >= 90 %, symmetric and
  // with zero points. Measured on the frozen corpus: mean KL 0.0074 and 0.0040 nats, top-1 94.6 % and 94.6 %
  // (groups of 128 and 32); with zero points 0.0061 and 0.0030, 93.1 % and 95.7 %. The top-1 figure of this
  // 2-layer, 128-wide model moves with the text and the seed it trains on: over four seeds on one version of the
  // documents, the searched scales (tools/llmc_export/quantize.py) gave 90.5-94.6 % at groups of 128, where the
  // plain rule before them gave 89.1-93.0 %.
  for (const auto& [label, package] : std::vector<std::pair<std::string, std::string>>{
           {"int4 groups of 128", packages.int4_group128},
           {"int4 groups of 32", packages.int4_group32},
           {"int4 groups of 128 with zero points", packages.int4_zero_point_group128},
           {"int4 groups of 32 with zero points", packages.int4_zero_point_group32}}) {
    auto quantized = testing::LoadModelOrFail(package, {"cpu", ""});
    REQUIRE(quantized->manifest().quantization == "int4");
    const auto quality = testing::MeasureQuantizationQuality(*reference, *quantized, held_out);
    WARN(label << ": mean KL " << quality.mean_kl << " nats, max " << quality.max_kl << ", top-1 agreement "
               << quality.top1_agreement << " over " << quality.positions << " held-out tokens");
    CHECK(quality.positions == 2048);
    CHECK(quality.mean_kl <= 0.05);
    CHECK(quality.top1_agreement >= 0.90);
  }
}

}  // namespace
}  // namespace llmc::model
