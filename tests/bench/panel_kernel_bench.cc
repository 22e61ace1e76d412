// How fast each decode panel kernel multiplies with its weights already in cache (one core, 16 panels of
// k = 896, about 0.2-1.8 MB), for 1, 2 and 4 rows: the kernel's own ceiling, against which a step's weight
// stream (llmc_model_bench) is judged. A kernel whose in-cache rate is not well above what one core reads
// from memory sets the step's pace itself. Prints GB/s of weights per kernel and row count; judges nothing.
//
//   llmc_panel_kernel_bench [repeats]   (default 3000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/panel_kernels.h"

namespace {

using llmc::model::cpu::Int8PanelArgs;
using llmc::model::cpu::kPanelWidth;
using llmc::model::cpu::PanelArgs;

constexpr int64_t kDepth = 896, kPanels = 16, kGroupPairs = 64, kRowsMax = 4;

[[maybe_unused]] double BestSeconds(int repeats, const std::function<void()>& pass) {
  double best = 1e9;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats / 5; ++i) pass();
    best =
        std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / (repeats / 5));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
#ifndef LLMC_CPU_X86_KERNELS
  (void)argc;
  (void)argv;
  std::printf("this bench times the AVX512 kernels, which this build has not (not x86-64)\n");
  return 0;
#else
  const int repeats = argc > 1 ? std::max(5, std::atoi(argv[1])) : 3000;
  using llmc::model::cpu::CpuIsa;
  if (llmc::model::cpu::ActiveCpuIsa() < CpuIsa::kAvx512Bf16) {
    std::printf("this bench times the AVX512 kernels; the CPU lacks AVX512-BF16/VNNI\n");
    return 0;
  }
  std::mt19937 random(7);
  const int64_t groups = kDepth / 2 / kGroupPairs;
  std::vector<uint8_t> weights(kPanels * kDepth * kPanelWidth * 2);
  for (auto& byte : weights) byte = static_cast<uint8_t>(random() % 200);
  std::vector<float> scales(kPanels * groups * kPanelWidth, 0.01f);
  std::vector<int16_t> a16(kRowsMax * kDepth);
  std::vector<int8_t> a8(kRowsMax * kDepth);
  std::vector<uint16_t> a_bf16(kRowsMax * kDepth, 0x3f80);
  for (auto& value : a16) value = static_cast<int16_t>(static_cast<int>(random() % 255) - 127);
  for (size_t i = 0; i < a8.size(); ++i) a8[i] = static_cast<int8_t>(a16[i]);
  std::vector<float> a_scales(kRowsMax * groups, 0.01f);
  std::vector<int32_t> offsets(kRowsMax * groups, 0);
  std::vector<float> out(kRowsMax * kPanelWidth);

  struct Kernel {
    const char* name;
    double bytes_per_weight;
    void (*int8_kernel)(const Int8PanelArgs&);
    void (*plain_kernel)(const PanelArgs&);
  };
  const Kernel kernels[] = {
      {"bfloat16", 2.0, nullptr, &llmc::model::cpu::PanelBf16Avx512},
      {"int8 W8A16", 1.0, &llmc::model::cpu::PanelInt8Avx512, nullptr},
      {"int8 W8A8", 1.0, &llmc::model::cpu::PanelW8A8Avx512, nullptr},
      {"int4 W4A16", 0.5, &llmc::model::cpu::PanelInt4Avx512, nullptr},
      {"int4 W4A8", 0.5, &llmc::model::cpu::PanelW4A8Avx512, nullptr},
  };
  std::printf("one core, %lld panels of k = %lld in cache, best of 5 rounds of %d passes\n",
              static_cast<long long>(kPanels), static_cast<long long>(kDepth), repeats / 5);
  std::printf("| kernel | 1 row | 2 rows | 4 rows |\n|---|---:|---:|---:|\n");
  for (const Kernel& kernel : kernels) {
    const int64_t panel_bytes = static_cast<int64_t>(kDepth * kPanelWidth * kernel.bytes_per_weight);
    std::printf("| %s |", kernel.name);
    for (const int64_t rows : {1, 2, 4}) {
      const double seconds = BestSeconds(repeats, [&] {
        for (int64_t p = 0; p < kPanels; ++p) {
          const auto* panel = reinterpret_cast<const int8_t*>(weights.data() + p * panel_bytes);
          if (kernel.plain_kernel != nullptr) {
            kernel.plain_kernel({a_bf16.data(), kDepth, rows, kDepth, panel, out.data(), kPanelWidth});
          } else {
            kernel.int8_kernel({a16.data(), a_scales.data(), kDepth, rows, kDepth, kGroupPairs, groups, panel,
                                scales.data() + p * groups * kPanelWidth, groups, out.data(), kPanelWidth, a8.data(),
                                offsets.data()});
          }
        }
      });
      std::printf(" %.1f GB/s |", static_cast<double>(kPanels * panel_bytes) / seconds / 1e9);
    }
    std::printf("\n");
  }
  return 0;
#endif
}
