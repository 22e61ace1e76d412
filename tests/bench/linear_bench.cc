// Time of llmc::linear's CPU kernel against at::linear (oneDNN for bfloat16, the BLAS for float32) on the
// projection shapes of a Qwen2-0.5B-shaped model, for a range of input rows, with the weight bytes read per
// second. Prints figures; judges nothing. Picks kMaxFastRows* in worker/model/linear_cpu.cc.
//
//   llmc_linear_bench [bfloat16|float32 ...]
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "worker/model/linear_ops.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best time of `runs` calls, cycling over enough weight copies that none is still in the cache.
template <typename F>
double BestSeconds(int runs, F&& call) {
  double best = 1e9;
  for (int run = 0; run < runs; ++run) {
    const auto start = Clock::now();
    call(run);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::string> dtypes;
  for (int i = 1; i < argc; ++i) dtypes.push_back(argv[i]);
  if (dtypes.empty()) dtypes = {"bfloat16", "float32"};
  struct Shape {
    const char* label;
    int64_t k, n;
  };
  const Shape shapes[] = {{"q/o 896x896", 896, 896},
                          {"k/v 896x128", 896, 128},
                          {"gate/up 896x4864", 896, 4864},
                          {"down 4864x896", 4864, 896},
                          {"lm_head 896x151936", 896, 151936}};
  std::printf("threads %d\n%-9s %-19s %4s %11s %9s %11s %9s %8s\n", at::get_num_threads(), "dtype", "shape", "rows",
              "llmc ms", "GB/s", "aten ms", "GB/s", "speedup");
  for (const std::string& name : dtypes) {
    const at::ScalarType dtype = name == "float32" ? at::kFloat : at::kBFloat16;
    for (const Shape& shape : shapes) {
      const int64_t weight_bytes = shape.k * shape.n * static_cast<int64_t>(c10::elementSize(dtype));
      const int64_t copies = std::max<int64_t>(1, (256LL << 20) / weight_bytes);  // 256 MiB: beyond the L3
      std::vector<at::Tensor> weights;
      for (int64_t c = 0; c < copies; ++c) weights.push_back(at::randn({shape.n, shape.k}).to(dtype));
      for (const int64_t rows : {1, 2, 4, 8, 16}) {
        const at::Tensor input = at::randn({rows, shape.k}).to(dtype);
        const int runs = static_cast<int>(std::max<int64_t>(10, copies * 2));
        const auto time = [&](bool fast) {
          for (int warm = 0; warm < 2; ++warm) llmc::model::LinearCpu(input, weights[0], c10::nullopt, fast);
          return BestSeconds(
              runs, [&](int run) { llmc::model::LinearCpu(input, weights[run % copies], c10::nullopt, fast); });
        };
        const double llmc = time(true), aten = time(false);
        std::printf("%-9s %-19s %4lld %11.3f %9.1f %11.3f %9.1f %7.2fx\n", name.c_str(), shape.label,
                    static_cast<long long>(rows), llmc * 1e3, weight_bytes / llmc / 1e9, aten * 1e3,
                    weight_bytes / aten / 1e9, aten / llmc);
      }
    }
  }
  return 0;
}
