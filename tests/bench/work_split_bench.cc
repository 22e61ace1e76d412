// How the thread team's split of a projection's panels affects a decode step's weight stream: the int8 panel
// kernel over one row, on the Qwen2-0.5B shapes (24 layers of qkv, o, gate/up and down, then the LM head,
// each in its own memory, 497 MB in all), run as the fused operators run them, one team job per projection.
// Three splits take turns, step by step, so that the machine's slow and fast spells hit them alike:
//   shares   each member streams its own contiguous share, then takes runs from the back of the others'
//            (WorkQueue with one share per member, as the operators use it);
//   shared   every member takes the next run from one shared front (WorkQueue with one share);
//   one job  all projections in a single job, each member over its contiguous half: the stream with no
//            per-projection cost at all, the bound for the other two.
// Usage: llmc_work_split_bench [steps] [int8|int4]   (default 300 steps of int8 weights; int4 streams the same
// shapes at half a byte per weight through the W4A16 kernel, 262 MB; prints the machine, each split's step times and
// the median ratio of neighbouring steps). Environment: LLMC_THREADS (default all cores).
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/huge_page_arena.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/thread_team.h"

namespace {

using llmc::model::cpu::Int8PanelArgs;
using llmc::model::cpu::kPanelWidth;
using llmc::model::cpu::TeamMember;
using llmc::model::cpu::ThreadTeam;
using llmc::model::cpu::WorkQueue;

using Int8Kernel = void (*)(const Int8PanelArgs&);

Int8Kernel PickKernel(bool int4) {
#ifdef LLMC_CPU_X86_KERNELS
  using llmc::model::cpu::ActiveCpuIsa;
  using llmc::model::cpu::CpuIsa;
  if (ActiveCpuIsa() >= CpuIsa::kAvx512Vnni) {
    return int4 ? &llmc::model::cpu::PanelInt4Avx512 : &llmc::model::cpu::PanelInt8Avx512;
  }
  if (ActiveCpuIsa() >= CpuIsa::kAvx2)
    return int4 ? &llmc::model::cpu::PanelInt4Avx2 : &llmc::model::cpu::PanelInt8Avx2;
#endif
  return int4 ? &llmc::model::cpu::PanelInt4Portable : &llmc::model::cpu::PanelInt8Portable;
}

struct Projection {
  const int8_t* panels;
  int64_t k, count;
  const float* scales;  // [count][weight_groups][kPanelWidth]
  int64_t weight_groups;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 300;
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency()));
  const bool int4 = argc > 2 && std::string(argv[2]) == "int4";
  if (argc > 2 && !int4 && std::string(argv[2]) != "int8") {
    std::fprintf(stderr, "weights are int8 or int4, not '%s'\n", argv[2]);
    return 2;
  }
  const Int8Kernel kernel = PickKernel(int4);
  // Bytes of one panel column per input: int4 packs two weights a byte.
  const auto panel_bytes = [int4](int64_t k) { return int4 ? k * kPanelWidth / 2 : k * kPanelWidth; };
  // (depth, panels) of one layer's qkv, o, gate/up and down, then the LM head.
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int layer = 0; layer < 24; ++layer) {
    for (const auto& shape : {std::pair<int64_t, int64_t>{896, 18}, {896, 14}, {896, 152}, {4864, 14}}) {
      shapes.push_back(shape);
    }
  }
  shapes.push_back({896, 2374});
  int64_t total = 0;
  for (const auto& [k, count] : shapes) total += panel_bytes(k) * count;
  // int8 packages scale each column; int4 packages each column's group of 128 inputs, in their own stream.
  const auto weight_groups = [int4](int64_t k) { return int4 ? k / 128 : int64_t{1}; };
  int64_t scale_count = 0;
  for (const auto& [k, count] : shapes) scale_count += weight_groups(k) * count * kPanelWidth;
  const auto arena = llmc::model::cpu::HugePageArena::Create(
      llmc::model::cpu::HugePageArena::TensorBytes(static_cast<size_t>(total)) +
      llmc::model::cpu::HugePageArena::TensorBytes(static_cast<size_t>(4 * scale_count)));
  const at::Tensor weights = arena->Empty({total}, at::kChar);
  std::memset(weights.data_ptr(), 1, static_cast<size_t>(total));
  const at::Tensor scales = arena->Empty({scale_count}, at::kFloat).fill_(0.01f);
  std::vector<Projection> projections;
  int64_t offset = 0, scale_offset = 0;
  for (const auto& [k, count] : shapes) {
    projections.push_back({static_cast<const int8_t*>(weights.data_ptr()) + offset, k, count,
                           scales.data_ptr<float>() + scale_offset, weight_groups(k)});
    offset += panel_bytes(k) * count;
    scale_offset += weight_groups(k) * count * kPanelWidth;
  }
  const std::vector<int16_t> activations(4864, 3);
  const std::vector<float> activation_scales(64, 0.1f);
  const auto panel = [&](const Projection& projection, int64_t p, float* out) {
    kernel({activations.data(), activation_scales.data(), projection.k, 1, projection.k, 64, projection.k / 128,
            projection.panels + p * panel_bytes(projection.k),
            projection.scales + p * projection.weight_groups * kPanelWidth, projection.weight_groups, out,
            kPanelWidth});
  };
  ThreadTeam& team = ThreadTeam::Get();
  const char* names[3] = {"shares", "shared", "one job"};
  std::vector<double> ms[3];
  for (int step = 0; step < 3 * steps; ++step) {
    const int split = step % 3;
    const auto start = std::chrono::steady_clock::now();
    if (split == 2) {
      team.Run([&](TeamMember& member) {
        std::vector<float> out(16 * kPanelWidth);
        for (const Projection& projection : projections) {
          const auto [first, last] = member.Share(projection.count);
          for (int64_t p = first; p < last; ++p) panel(projection, p, out.data());
        }
      });
    } else {
      for (const Projection& projection : projections) {
        WorkQueue queue(projection.count, split == 0 ? at::get_num_threads() : 1);
        team.Run([&](TeamMember& member) {
          float out[16 * kPanelWidth];
          const int64_t run = std::max<int64_t>(1, projection.count / (16 * member.size()));
          for (auto [first, last] = queue.Claim(member, run); first < last;
               std::tie(first, last) = queue.Claim(member, run)) {
            for (int64_t p = first; p < last; ++p) panel(projection, p, out);
          }
        });
      }
    }
    ms[split].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3);
  }
  std::printf("machine: %s, %d threads; %s weights, %.0f MB\n", llmc::model::cpu::DescribeCpu().c_str(),
              at::get_num_threads(), int4 ? "int4" : "int8", static_cast<double>(total) / 1e6);
  std::printf("%-8s %10s %10s %10s %12s\n", "split", "best ms", "p10 ms", "median ms", "best GB/s");
  for (int split = 0; split < 3; ++split) {
    std::vector<double> sorted = ms[split];
    std::sort(sorted.begin(), sorted.end());
    std::printf("%-8s %10.2f %10.2f %10.2f %12.1f\n", names[split], sorted.front(), sorted[sorted.size() / 10],
                sorted[sorted.size() / 2], static_cast<double>(total) / sorted.front() / 1e6);
  }
  // Ratios of neighbouring steps (the same minute of the machine), as step time of `shared` / the other.
  for (const int split : {0, 2}) {
    std::vector<double> ratios, fast_ratios;
    const double fast = Median(ms[2]) * 0.8;  // steps well below the median of the bound: a fast spell
    for (size_t i = 0; i < ms[1].size(); ++i) {
      ratios.push_back(ms[1][i] / ms[split][i]);
      if (ms[2][i] < fast) fast_ratios.push_back(ms[1][i] / ms[split][i]);
    }
    std::printf("shared / %-7s median %.3f over %zu steps; %.3f over the %zu steps of fast spells\n", names[split],
                Median(ratios), ratios.size(), Median(fast_ratios), fast_ratios.size());
  }
  return 0;
}
