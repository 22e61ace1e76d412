#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "worker/model/linear_avx512.h"
#include "worker/model/linear_ops.h"

namespace llmc::model {
namespace {

// Up to this many input rows the streaming kernel beats oneDNN (bfloat16) and OpenBLAS (float32) here;
// beyond it the libraries' blocked GEMMs win (tests/bench/linear_bench.cc measures both).
constexpr int64_t kMaxFastRowsBf16 = 8;
constexpr int64_t kMaxFastRowsFloat = 8;
// The kernel reads the input rows once per weight row, so several rows must stay in the L1 cache beside the
// weight stream (half of a 32 KiB L1); beyond that (2 or more rows of the 4864-wide down projection) oneDNN
// is faster.
constexpr int64_t kMaxInputBytes = 16 * 1024;
// Threads take chunks of about this many weight bytes from a shared counter: small layers are not split
// into tasks that cost more to start than to run, and a thread that starts late (the other core busy) does
// not hold the step up by a fixed half of the work.
constexpr int64_t kChunkBytes = 64 * 1024;

// LLMC_LINEAR_AVX512 is set where linear_avx512.cc is compiled (an x86-64 compiler that knows AVX512_BF16);
// the CPU running the code is checked here.
#ifdef LLMC_LINEAR_AVX512
bool CpuHasAvx512Bf16() {
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return supported;
}

bool CpuHasAvx512F() {
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
}

at::Tensor SkinnyLinear(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  const int64_t n = weight.size(0), k = weight.size(1);
  at::Tensor rows = input.reshape({-1, k});
  if (rows.stride(1) != 1) rows = rows.contiguous();
  std::vector<int64_t> out_sizes(input.sizes().begin(), input.sizes().end());
  out_sizes.back() = n;
  at::Tensor out = at::empty(out_sizes, input.options());
  const bool has_bias = bias.has_value() && bias->defined();
  const avx512::SkinnyLinearArgs args{rows.data_ptr(),
                                      rows.stride(0),
                                      weight.data_ptr(),
                                      has_bias ? bias->data_ptr() : nullptr,
                                      out.data_ptr(),
                                      n,
                                      rows.size(0),
                                      n,
                                      k};
  const auto kernel = weight.scalar_type() == at::kBFloat16 ? &avx512::SkinnyLinearBf16 : &avx512::SkinnyLinearFloat;
  const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkBytes / (k * static_cast<int64_t>(weight.element_size())));
  const int64_t chunks = (n + rows_per_chunk - 1) / rows_per_chunk;
  std::atomic<int64_t> next_chunk{0};
  at::parallel_for(0, std::min<int64_t>(chunks, at::get_num_threads()), 1, [&](int64_t, int64_t) {
    for (int64_t chunk = next_chunk++; chunk < chunks; chunk = next_chunk++) {
      kernel(args, chunk * rows_per_chunk, std::min(n, (chunk + 1) * rows_per_chunk));
    }
  });
  return out;
}
#else
bool CpuHasAvx512Bf16() { return false; }
bool CpuHasAvx512F() { return false; }
at::Tensor SkinnyLinear(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  return at::linear(input, weight, bias);
}
#endif

bool SameDtypeOnCpu(const at::Tensor& tensor, const at::Tensor& weight) {
  return tensor.scalar_type() == weight.scalar_type() && tensor.device().is_cpu();
}

}  // namespace

int64_t LinearCpuMaxFastRows(at::ScalarType dtype) {
  if (dtype == at::kBFloat16 && CpuHasAvx512Bf16()) return kMaxFastRowsBf16;
  if (dtype == at::kFloat && CpuHasAvx512F()) return kMaxFastRowsFloat;
  return 0;
}

bool LinearCpuUsesFastPath(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  const int64_t max_rows = LinearCpuMaxFastRows(weight.scalar_type());
  if (max_rows == 0 || !weight.device().is_cpu() || !SameDtypeOnCpu(input, weight)) return false;
  if (weight.dim() != 2 || !weight.is_contiguous() || weight.numel() == 0 || input.dim() < 1) return false;
  const int64_t k = weight.size(1);
  if (input.size(-1) != k) return false;
  const int64_t rows = input.numel() / k;
  if (rows < 1 || rows > max_rows || (rows > 1 && rows * k * weight.element_size() > kMaxInputBytes)) return false;
  if (!bias.has_value() || !bias->defined()) return true;
  return SameDtypeOnCpu(*bias, weight) && bias->dim() == 1 && bias->size(0) == weight.size(0) && bias->is_contiguous();
}

at::Tensor LinearCpu(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                     bool allow_fast_path) {
  if (allow_fast_path && LinearCpuUsesFastPath(input, weight, bias)) return SkinnyLinear(input, weight, bias);
  return at::linear(input, weight, bias);
}

bool EnsureLinearOpRegistered() { return true; }

}  // namespace llmc::model

TORCH_LIBRARY_FRAGMENT(llmc, m) { m.def("linear(Tensor input, Tensor weight, Tensor? bias) -> Tensor"); }

TORCH_LIBRARY_IMPL(llmc, CPU, m) {
  m.impl("linear", [](const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
    return llmc::model::LinearCpu(input, weight, bias);
  });
}
