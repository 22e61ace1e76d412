// The torch-facing side of the CUDA int8 matrix product (int8_linear_cuda_kernels.h). Built only when
// libtorch has CUDA (LLMC_WITH_CUDA).
#include "worker/model/int8_linear_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>

#include "worker/model/dequantized_slices_cuda.h"
#include "worker/model/int8_linear_cuda_kernels.h"

namespace llmc::model {
namespace {

// From this many weights on, up to two launches of the kernel's rows beat dequantizing, which writes and reads
// twice the bytes that streaming reads. Measured on an H100, one 32-row launch against dequantizing for 64
// rows: 4096 x 4096 (16.8 M weights) 11.2 against over 32 us, 6144 x 4096 18.5 against 52, 151936 x 896 101
// against 303; but 9728 x 896 (8.7 M, which sits in the 50 MB L2, where dequantizing is cheap) 11.6 against
// 16.6. Sizes between were not measured.
constexpr int64_t kTwoLaunchMinWeights = int64_t{16} << 20;

bool WidthsFit(const at::Tensor& weight, const at::Tensor& weight_scale) {
  return weight.is_cuda() && weight_scale.device() == weight.device() && weight.scalar_type() == at::kChar &&
         weight.dim() == 2 && weight.is_contiguous() && weight_scale.dim() == 2 &&
         weight_scale.size(0) == weight.size(0) &&
         cuda::Int8WeightsFit(static_cast<const int8_t*>(weight.data_ptr()), weight.size(0), weight.size(1),
                              weight_scale.size(1));
}

// Dequantizes weight rows [first, first + count) into the start of `slice` ([>= count, K], 16-byte aligned).
void DequantizeRows(const at::Tensor& weight, const at::Tensor& scales, int64_t first, int64_t count,
                    at::Tensor& slice) {
  const int64_t k_size = weight.size(1), groups = scales.size(1);
  const cudaError_t error = cuda::LaunchDequantizeInt8(
      weight.data_ptr<int8_t>() + first * k_size, scales.data_ptr<float>() + first * groups, static_cast<int>(count),
      static_cast<int>(k_size), static_cast<int>(groups), slice.data_ptr(), slice.scalar_type() == at::kBFloat16,
      at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(error == cudaSuccess, "int8 dequantize: ", cudaGetErrorString(error));
}

// One launch of the kernel per kInt8LinearMaxRows rows, each reading every weight once.
at::Tensor StreamWeights(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& scales,
                         const at::Tensor& bias) {
  at::Tensor out = at::empty({input.size(0), weight.size(0)}, input.options());
  for (int64_t first = 0; first < input.size(0); first += cuda::kInt8LinearMaxRows) {
    const int64_t rows = std::min<int64_t>(cuda::kInt8LinearMaxRows, input.size(0) - first);
    const at::Tensor input_rows = input.narrow(0, first, rows);
    const at::Tensor out_rows = out.narrow(0, first, rows);
    const cuda::Int8LinearParams params{input_rows.data_ptr(),
                                        weight.data_ptr<int8_t>(),
                                        scales.data_ptr<float>(),
                                        bias.defined() ? bias.data_ptr() : nullptr,
                                        out_rows.data_ptr(),
                                        static_cast<int>(rows),
                                        static_cast<int>(weight.size(0)),
                                        static_cast<int>(weight.size(1)),
                                        static_cast<int>(scales.size(1)),
                                        input.scalar_type() == at::kBFloat16};
    const cudaError_t error = cuda::LaunchInt8Linear(params, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(error == cudaSuccess, "int8 linear: ", cudaGetErrorString(error));
  }
  return out;
}

}  // namespace

bool Int8LinearCudaApplies(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale) {
  return WidthsFit(weight, weight_scale) && input.is_cuda() && input.device() == weight.device() && input.dim() == 2 &&
         input.size(1) == weight.size(1) && input.size(0) >= 1 &&
         (input.scalar_type() == at::kFloat || input.scalar_type() == at::kBFloat16);
}

bool Int8LinearCudaStreamsWeights(const at::Tensor& input, const at::Tensor& weight) {
  // A contiguous input keeps its address (and so its alignment); another is copied to a fresh one.
  const void* x = input.is_contiguous() ? input.data_ptr() : nullptr;
  const c10::cuda::CUDAGuard device_guard(input.device());
  const int64_t limit = cuda::Int8LinearRowLimit(x, input.scalar_type() == at::kBFloat16);
  if (input.size(0) <= limit) return true;
  // Every row of a launch on tensor cores starts on a 16-byte boundary too, since K is a multiple of 16.
  return limit == cuda::kInt8LinearMaxRows && weight.numel() >= kTwoLaunchMinWeights &&
         input.size(0) <= 2 * cuda::kInt8LinearMaxRows;
}

at::Tensor Int8LinearCuda(const at::Tensor& input_in, const at::Tensor& weight_in, const at::Tensor& scale_in,
                          const c10::optional<at::Tensor>& bias_in) {
  TORCH_CHECK(Int8LinearCudaApplies(input_in, weight_in, scale_in), "int8 linear: shapes or devices it cannot take");
  const c10::cuda::CUDAGuard device_guard(input_in.device());
  const bool streamed = Int8LinearCudaStreamsWeights(input_in, weight_in);
  const at::Tensor input = input_in.contiguous();
  const at::Tensor scales = scale_in.to(at::kFloat).contiguous();
  at::Tensor bias;
  if (bias_in.has_value() && bias_in->defined()) {
    TORCH_CHECK(bias_in->numel() == weight_in.size(0), "int8 linear: bias needs ", weight_in.size(0), " values");
    bias = bias_in->to(input.options()).contiguous();
  }
  if (streamed) return StreamWeights(input, weight_in, scales, bias);
  return MultiplyDequantizedSlices(
      input, weight_in.size(0), bias,
      [&](int64_t first, int64_t count, at::Tensor& slice) { DequantizeRows(weight_in, scales, first, count, slice); });
}

bool DequantizeInt8CudaApplies(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype) {
  return WidthsFit(weight, weight_scale) && (dtype == at::kFloat || dtype == at::kBFloat16);
}

at::Tensor DequantizeInt8Cuda(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype) {
  TORCH_CHECK(DequantizeInt8CudaApplies(weight, weight_scale, dtype), "int8 dequantize: shapes it cannot take");
  const c10::cuda::CUDAGuard device_guard(weight.device());
  at::Tensor out = at::empty(weight.sizes(), weight.options().dtype(dtype));
  DequantizeRows(weight, weight_scale.to(at::kFloat).contiguous(), 0, weight.size(0), out);
  return out;
}

}  // namespace llmc::model
