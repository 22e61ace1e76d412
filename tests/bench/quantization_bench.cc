// How close int8 weights keep a model to its bfloat16 self: teacher-forced over 512 tokens of real text
// (this repository's documentation in the package's vocabulary), the mean KL(bf16 || int8) per position and
// the top-1 agreement, for one scale per output row and for groups of 128 (quantized at load), with int16
// activations (w8a16) and int8 activations (w8a8), and for an exported int8 package when given. The default,
// int8, runs decode steps of fewer than 8 rows as w8a16 and larger batches and prefill as w8a8: the bench
// prefills in chunks of 128 (as w8a8) and, for the decode path, one position per step (as w8a16).
// Prints figures; judges nothing.
//
//   llmc_quantization_bench <bf16-package> [<int8-package>]
#include <ATen/Parallel.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/quantization_quality.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

constexpr int64_t kPositions = 512;

std::unique_ptr<llmc::model::LoadedModel> Load(const std::string& package, const std::string& quantization,
                                               int64_t group_size) {
  auto model = llmc::model::LoadedModel::Load(package, {"cpu", "", quantization, group_size});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(model);
}

void Report(const char* label, const llmc::testing::QuantizationQuality& quality) {
  std::printf("%-34s %10d %14.5f %14.5f %14.2f%%\n", label, static_cast<int>(quality.positions), quality.mean_kl,
              quality.max_kl, quality.top1_agreement * 100);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <bf16-package> [<int8-package>]\n", argv[0]);
    return 2;
  }
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency()));
  const std::string package = argv[1];
  auto tokenizer = llmc::tokenizer::Tokenizer::FromFile(package + "/tokenizer.json");
  if (!tokenizer.ok()) return 1;
  std::stringstream text;
  for (const char* doc : {"/docs/architecture.md", "/docs/engine.md", "/README.md"}) {
    text << std::ifstream(std::string(LLMC_SOURCE_DIR) + doc).rdbuf();
  }
  auto ids = (*tokenizer)->Encode(text.str());
  if (!ids.ok() || static_cast<int64_t>(ids->size()) < kPositions) return 1;
  const std::vector<int64_t> tokens(ids->begin(), ids->begin() + kPositions);
  std::printf("%s; %s against its bfloat16 weights, %lld positions of real text, teacher-forced\n",
              llmc::model::cpu::DescribeCpu().c_str(), package.c_str(), static_cast<long long>(kPositions));
  std::printf("%-34s %10s %14s %14s %15s\n", "int8 weights", "positions", "mean KL (nats)", "max KL",
              "top-1 agreement");
  auto reference = Load(package, "", 0);
  {
    // The yardstick: how far rounding the activations to bfloat16 alone (same weights, no quantization)
    // moves this model from running them in float32. A random model's next-token distributions are nearly
    // flat, so its top-1 flips under small perturbations that a trained model's would not notice.
    auto float_activations = llmc::model::LoadedModel::Load(package, {"cpu", "float32"});
    if (!float_activations.ok()) return 1;
    Report("(none: bfloat16 vs float32 activations)",
           llmc::testing::MeasureQuantizationQuality(**float_activations, *reference, tokens));
  }
  Report("w8a16: one scale per row, at load",
         llmc::testing::MeasureQuantizationQuality(*reference, *Load(package, "w8a16", 0), tokens));
  Report("w8a16: groups of 128, at load",
         llmc::testing::MeasureQuantizationQuality(*reference, *Load(package, "w8a16", 128), tokens));
  Report("w8a8: one scale per row",
         llmc::testing::MeasureQuantizationQuality(*reference, *Load(package, "w8a8", 0), tokens));
  Report("w8a8: groups of 128",
         llmc::testing::MeasureQuantizationQuality(*reference, *Load(package, "w8a8", 128), tokens));
  if (argc > 2) {
    // The package's own setting, int8: prefill chunks run as w8a8, single decode rows as w8a16.
    auto exported = Load(argv[2], "", 0);
    Report("exported int8, prefill chunks", llmc::testing::MeasureQuantizationQuality(*reference, *exported, tokens));
    Report("exported int8, one row per step",
           llmc::testing::MeasureQuantizationQuality(*reference, *exported, tokens, /*chunk=*/1));
  }
  return 0;
}
