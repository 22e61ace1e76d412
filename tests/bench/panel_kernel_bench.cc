// How fast each decode panel kernel multiplies with its weights already in cache (one core, 16 panels of
// k = 896, about 0.2-1.8 MB), for 1, 2 and 4 rows: the kernel's own ceiling, against which a step's weight
// stream (llmc_model_bench) is judged. A kernel whose in-cache rate is not well above what one core reads
// from memory sets the step's pace itself. Prints GB/s of weights per kernel and row count; judges nothing.
//
// --memory[=MiB] instead streams each kernel over MiB (default 512) of panels on huge pages, one row, on
// LLMC_THREADS threads (default: every core), each over its own contiguous share, and pairs every pass with a
// pass of the benches' plain prefetching reader over as many bytes (stream_reader.h): the kernel's share of
// what the machine reads at that moment, with nothing but the kernel between panels (no operator, no
// hand-off). A decode step's projections can stream no faster than this. The 4-bit kernels run with their weight
// prefetches into L1 and, as separate rows, into L2 only (cpu_isa.h, WeightPrefetch).
//
// --tiles instead times the prefill kernels on AMX tiles (where the CPU has them): 128 rows against 16 panels of
// k = 896 and of k = 4864 (Qwen2-0.5B's projections and its down projection), weights in cache, one core, with the
// tile operand built beforehand as PanelMultiplier builds it once per panel (for int4 requantized to int8, built in
// the pass, as that is its cost); prints GMAC/s per kernel.
//
//   llmc_panel_kernel_bench [repeats]   (default 3000)
//   llmc_panel_kernel_bench --memory[=MiB] [rounds]   (default 15)
//   llmc_panel_kernel_bench --tiles [repeats]   (default 20)
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/bench/stream_reader.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/huge_page_arena.h"
#include "worker/model/cpu/int4_requantize.h"
#include "worker/model/cpu/panel_kernels.h"

namespace {

using llmc::model::cpu::Int8PanelArgs;
using llmc::model::cpu::kPanelWidth;
using llmc::model::cpu::PanelArgs;

constexpr int64_t kDepth = 896, kPanels = 16, kGroupPairs = 64, kRowsMax = 4;
constexpr int64_t kGroups = kDepth / 2 / kGroupPairs;

struct Kernel {
  const char* name;
  double bytes_per_weight;
  void (*int8_kernel)(const Int8PanelArgs&);
  void (*plain_kernel)(const PanelArgs&);
  // Scale groups per column: 1 (int8, per output row, as int8 packages have them) or kGroups (int4).
  int64_t weight_groups;
  int64_t PanelBytes() const { return static_cast<int64_t>(kDepth * kPanelWidth * bytes_per_weight); }
};

// Activations of kRowsMax rows in every form the kernels take.
struct Activations {
  std::vector<int16_t> a16 = std::vector<int16_t>(kRowsMax * kDepth);
  std::vector<int8_t> a8 = std::vector<int8_t>(kRowsMax * kDepth);
  std::vector<uint16_t> bf16 = std::vector<uint16_t>(kRowsMax * kDepth, 0x3f80);
  std::vector<float> scales = std::vector<float>(kRowsMax * kGroups, 0.01f);
  std::vector<int32_t> offsets = std::vector<int32_t>(kRowsMax * kGroups, 0);

  explicit Activations(std::mt19937& random) {
    for (auto& value : a16) value = static_cast<int16_t>(static_cast<int>(random() % 255) - 127);
    for (size_t i = 0; i < a8.size(); ++i) a8[i] = static_cast<int8_t>(a16[i]);
  }
};

// `rows` rows against one panel (and its scales) into out [kRowsMax][kPanelWidth].
void RunPanel(const Kernel& kernel, const Activations& x, int64_t rows, const uint8_t* panel, const float* scales,
              float* out) {
  const auto* weights = reinterpret_cast<const int8_t*>(panel);
  if (kernel.plain_kernel != nullptr) {
    kernel.plain_kernel({x.bf16.data(), kDepth, rows, kDepth, weights, out, kPanelWidth});
    return;
  }
  kernel.int8_kernel({x.a16.data(), x.scales.data(), kDepth, rows, kDepth, kGroupPairs, kGroups, weights, scales,
                      kernel.weight_groups, out, kPanelWidth, x.a8.data(), x.offsets.data()});
}

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

void InCache(const std::vector<Kernel>& kernels, const Activations& x, int repeats, std::mt19937& random) {
  std::vector<uint8_t> weights(kPanels * kDepth * kPanelWidth * 2);
  for (auto& byte : weights) byte = static_cast<uint8_t>(random() % 200);
  std::vector<float> scales(kPanels * kGroups * kPanelWidth, 0.01f);
  std::vector<float> out(kRowsMax * kPanelWidth);
  std::printf("one core, %lld panels of k = %lld in cache, best of 5 rounds of %d passes\n",
              static_cast<long long>(kPanels), static_cast<long long>(kDepth), repeats / 5);
  std::printf("| kernel | 1 row | 2 rows | 4 rows |\n|---|---:|---:|---:|\n");
  for (const Kernel& kernel : kernels) {
    const int64_t panel_bytes = kernel.PanelBytes();
    std::printf("| %s |", kernel.name);
    for (const int64_t rows : {1, 2, 4}) {
      const double seconds = BestSeconds(repeats, [&] {
        for (int64_t p = 0; p < kPanels; ++p) {
          RunPanel(kernel, x, rows, weights.data() + p * panel_bytes, scales.data() + p * kGroups * kPanelWidth,
                   out.data());
        }
      });
      std::printf(" %.1f GB/s |", static_cast<double>(kPanels * panel_bytes) / seconds / 1e9);
    }
    std::printf("\n");
  }
}

// Seconds for one row against every panel of `weights`, on `threads` threads with a contiguous share each.
double StreamSeconds(const Kernel& kernel, const Activations& x, const uint8_t* weights, const float* scales,
                     int64_t panels, int threads) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      std::vector<float> out(kRowsMax * kPanelWidth);
      const int64_t panel_bytes = kernel.PanelBytes(), scale_floats = kernel.weight_groups * kPanelWidth;
      for (int64_t p = panels * t / threads; p < panels * (t + 1) / threads; ++p) {
        RunPanel(kernel, x, 1, weights + p * panel_bytes, scales + p * scale_floats, out.data());
      }
    });
  }
  for (auto& thread : team) thread.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void FromMemory(const std::vector<Kernel>& kernels, const Activations& x, int64_t mib, int rounds) {
  const char* threads_variable = std::getenv("LLMC_THREADS");
  const int threads = std::max(
      1, threads_variable ? std::atoi(threads_variable) : static_cast<int>(std::thread::hardware_concurrency()));
  const int64_t bytes = mib << 20;
  // One byte value throughout: the kernels take as long whatever the weights are, and the reads as long whatever
  // the memory holds (a probe of constant, zero and random buffers read alike).
  const at::Tensor weights = llmc::model::cpu::EmptyOnHugePages({bytes}, at::kByte).fill_(0x5a);
  // Enough scales for the most panels any kernel has (int4's), as a separate stream like the packed scales.
  const int64_t most_panels = bytes / (kDepth * kPanelWidth / 2);
  at::Tensor scales = llmc::model::cpu::EmptyOnHugePages({most_panels * kGroups * kPanelWidth}, at::kFloat).fill_(0.01);
  std::printf("%d threads, one row, %lld MiB of panels of k = %lld from memory; each pass paired with a plain read\n",
              threads, static_cast<long long>(mib), static_cast<long long>(kDepth));
  std::printf(
      "| kernel | kernel GB/s (median) | read GB/s (median) | share of the read: median | best | median near the "
      "best read (passes) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  std::vector<std::vector<double>> kernel_gbs(kernels.size()), read_gbs(kernels.size()), shares(kernels.size());
  for (int round = -1; round < rounds; ++round) {
    for (size_t k = 0; k < kernels.size(); ++k) {
      const Kernel& kernel = kernels[k];
      const int64_t panels = bytes / kernel.PanelBytes();
      const double streamed =
          static_cast<double>(panels * (kernel.PanelBytes() + kernel.weight_groups * kPanelWidth * 4));
      const double kernel_rate = streamed / StreamSeconds(kernel, x, static_cast<const uint8_t*>(weights.data_ptr()),
                                                          scales.data_ptr<float>(), panels, threads);
      const double read_gbs_now =
          llmc::bench::PrefetchingReadGbPerSecond(static_cast<const char*>(weights.data_ptr()),
                                                  std::min<int64_t>(static_cast<int64_t>(streamed), bytes), threads);
      if (round < 0) continue;  // the first round warms the pages and the threads
      kernel_gbs[k].push_back(kernel_rate / 1e9);
      read_gbs[k].push_back(read_gbs_now);
      shares[k].push_back(kernel_rate / 1e9 / read_gbs_now);
    }
  }
  const auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  // The machine's memory has fast and slow spells: the passes paired with a read within 10 % of the run's best
  // show the kernels when bandwidth is plentiful.
  double best_read = 0;
  for (const auto& reads : read_gbs) best_read = std::max(best_read, *std::max_element(reads.begin(), reads.end()));
  for (size_t k = 0; k < kernels.size(); ++k) {
    std::vector<double> fast;
    for (size_t i = 0; i < shares[k].size(); ++i) {
      if (read_gbs[k][i] >= 0.9 * best_read) fast.push_back(shares[k][i]);
    }
    std::printf("| %s | %.1f | %.1f | %.1f %% | %.1f %% | %s (%zu) |\n", kernels[k].name, median(kernel_gbs[k]),
                median(read_gbs[k]), median(shares[k]) * 100,
                *std::max_element(shares[k].begin(), shares[k].end()) * 100,
                fast.empty() ? "-" : absl::StrFormat("%.1f %%", median(fast) * 100).c_str(), fast.size());
  }
  std::printf("best read %.1f GB/s\n", best_read);
}

// 128 rows of a prefill against kPanels panels of depth k: the tile kernels' multiply-adds per second.
void OnTiles(int64_t k, int repeats, std::mt19937& random) {
  using llmc::model::cpu::AmxTilePanel;
  constexpr int64_t kRows = 128, kGroupInputs = 128;
  const int64_t groups = k / kGroupInputs;
  std::vector<int8_t> a8(kRows * k);
  for (auto& value : a8) value = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
  std::vector<uint16_t> bf16(kRows * k, 0x3f80);
  std::vector<float> a_scales(kRows * groups, 0.01f), scales(groups * kPanelWidth, 0.01f);
  std::vector<int32_t> offsets(kRows * groups, 0);
  std::vector<uint8_t> weights(k * kPanelWidth * 2);
  for (auto& byte : weights) byte = static_cast<uint8_t>(random() % 200);
  std::vector<float> out(kRows * kPanelWidth);
  const double macs = static_cast<double>(kPanels * kRows * k * kPanelWidth);
  const auto report = [&](const char* name, const std::function<void()>& panel) {
    const double seconds = BestSeconds(repeats, [&] {
      for (int64_t p = 0; p < kPanels; ++p) panel();
    });
    std::printf("| %s | %lld | %.0f |\n", name, static_cast<long long>(k), macs / seconds / 1e9);
  };
  report("bfloat16 (AMX-BF16)", [&] {
    llmc::model::cpu::PanelBf16Amx({bf16.data(), k, kRows, k, weights.data(), out.data(), kPanelWidth});
  });
  for (const bool int4 : {false, true}) {
    // Copied: AmxTilePanel's buffer is the thread's own until its next call.
    const int8_t* built = AmxTilePanel(weights.data(), k, int4);
    const std::vector<int8_t> tile_panel(built, built + k * kPanelWidth);
    Int8PanelArgs args{nullptr,
                       a_scales.data(),
                       k,
                       kRows,
                       k,
                       (int4 ? kGroupInputs : k) / 2,
                       int4 ? groups : 1,
                       reinterpret_cast<const int8_t*>(weights.data()),
                       scales.data(),
                       int4 ? groups : 1,
                       out.data(),
                       kPanelWidth,
                       a8.data(),
                       offsets.data()};
    args.amx_tile_panel = tile_panel.data();
    report(int4 ? "int4 W4A8, groups of 128 (AMX-INT8)" : "int8 W8A8 (AMX-INT8)",
           [&] { (int4 ? llmc::model::cpu::PanelW4A8Amx : llmc::model::cpu::PanelW8A8Amx)(args); });
  }
  // int4 requantized to int8 (int4_requantize.h), each panel's factors and tile operand built in the pass, as
  // PanelMultiplier builds them once per panel for its batch: the W8A8 tiles against rows with one scale each.
  std::vector<float> factors(groups * kPanelWidth), column_scales(kPanelWidth);
  std::vector<int32_t> offsets_by_group(groups * kPanelWidth);
  Int8PanelArgs args{nullptr, a_scales.data(), k, kRows,      k,           k / 2,     1,
                     nullptr, nullptr,         1, out.data(), kPanelWidth, a8.data(), offsets.data()};
  report("int4 requantized to int8, the build included (AMX-INT8)", [&] {
    llmc::model::cpu::Int4RequantizeFactors(scales.data(), nullptr, groups, factors.data(), offsets_by_group.data(),
                                            column_scales.data());
    args.scales = column_scales.data();
    args.amx_tile_panel = llmc::model::cpu::RequantizedInt4TilePanel(
        weights.data(), factors.data(), offsets_by_group.data(), groups, kGroupInputs / 2, k);
    llmc::model::cpu::PanelW8A8Amx(args);
  });
}

}  // namespace

int main(int argc, char** argv) {
#ifndef LLMC_CPU_X86_KERNELS
  (void)argc;
  (void)argv;
  std::printf("this bench times the AVX512 kernels, which this build has not (not x86-64)\n");
  return 0;
#else
  using llmc::model::cpu::CpuIsa;
  if (llmc::model::cpu::ActiveCpuIsa() < CpuIsa::kAvx512Vnni) {
    std::printf("this bench times the AVX512 kernels; the CPU lacks AVX512-VNNI\n");
    return 0;
  }
  std::mt19937 random(7);
  const Activations x(random);
  std::vector<Kernel> kernels = {
      {"bfloat16", 2.0, nullptr, &llmc::model::cpu::PanelBf16Avx512, 0},
      {"int8 W8A16", 1.0, &llmc::model::cpu::PanelInt8Avx512, nullptr, 1},
      {"int8 W8A8", 1.0, &llmc::model::cpu::PanelW8A8Avx512, nullptr, 1},
      {"int4 W4A16", 0.5, &llmc::model::cpu::PanelInt4Avx512, nullptr, kGroups},
      {"int4 W4A8", 0.5, &llmc::model::cpu::PanelW4A8Avx512, nullptr, kGroups},
      // The same kernels prefetching their weights only as far as L2 (cpu_isa.h, WeightPrefetch).
      {"int4 W4A16, prefetch to L2", 0.5, &llmc::model::cpu::PanelInt4Avx512PrefetchL2, nullptr, kGroups},
      {"int4 W4A8, prefetch to L2", 0.5, &llmc::model::cpu::PanelW4A8Avx512PrefetchL2, nullptr, kGroups},
  };
  // The avx512_vnni path (no AVX512-BF16) has the integer kernels only.
  if (llmc::model::cpu::ActiveCpuIsa() < CpuIsa::kAvx512Bf16) kernels.erase(kernels.begin());
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "--tiles") {
    if (!llmc::model::cpu::HasAmxInt8()) {
      std::printf("--tiles times the AMX kernels; this CPU has no AMX-INT8\n");
      return 0;
    }
    const int repeats = argc > 2 ? std::max(5, std::atoi(argv[2])) : 20;
    std::printf("one core, 128 rows against %lld panels in cache, best of 5 rounds of %d passes\n",
                static_cast<long long>(kPanels), repeats / 5);
    std::printf("| kernel | k | GMAC/s |\n|---|---:|---:|\n");
    for (const int64_t k : {int64_t{896}, int64_t{4864}}) OnTiles(k, repeats, random);
    return 0;
  }
  if (first == "--memory" || first.rfind("--memory=", 0) == 0) {
    const int64_t mib = first.size() > 9 ? std::max<int64_t>(64, std::atoll(first.c_str() + 9)) : 512;
    FromMemory(kernels, x, mib, argc > 2 ? std::max(1, std::atoi(argv[2])) : 15);
    return 0;
  }
  InCache(kernels, x, argc > 1 ? std::max(5, std::atoi(argv[1])) : 3000, random);
  return 0;
#endif
}
