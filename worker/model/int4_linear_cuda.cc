// The torch-facing side of the CUDA int4 kernels (int4_linear_cuda_kernels.h). Built only when libtorch has
// CUDA (LLMC_WITH_CUDA).
#include "worker/model/int4_linear_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>

#include "worker/model/dequantized_slices_cuda.h"
#include "worker/model/int4_linear_cuda_kernels.h"

namespace llmc::model {
namespace {

bool HasZeroPoints(const at::Tensor& weight_scale) { return weight_scale.dim() == 3 && weight_scale.size(2) == 2; }

bool WidthsFit(const at::Tensor& weight, const at::Tensor& weight_scale) {
  return weight.is_cuda() && weight_scale.device() == weight.device() && weight.scalar_type() == at::kByte &&
         weight.dim() == 2 && weight.is_contiguous() && (weight_scale.dim() == 2 || HasZeroPoints(weight_scale)) &&
         weight_scale.size(0) == weight.size(0) &&
         cuda::Int4WeightsFit(static_cast<const uint8_t*>(weight.data_ptr()), weight.size(0), 2 * weight.size(1),
                              weight_scale.size(1));
}

// Weight rows [first, first + count) dequantized into the start of `slice` ([>= count, K], 16-byte aligned).
void DequantizeRows(const at::Tensor& weight, const at::Tensor& scales, int64_t first, int64_t count,
                    at::Tensor& slice) {
  const int64_t packed_width = weight.size(1), groups = scales.size(1);
  const bool zero_points = HasZeroPoints(scales);
  const cudaError_t error = cuda::LaunchDequantizeInt4(
      weight.data_ptr<uint8_t>() + first * packed_width,
      scales.data_ptr<float>() + first * groups * (zero_points ? 2 : 1), zero_points, static_cast<int>(count),
      static_cast<int>(2 * packed_width), static_cast<int>(groups), slice.data_ptr(),
      slice.scalar_type() == at::kBFloat16, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(error == cudaSuccess, "int4 dequantize: ", cudaGetErrorString(error));
}

at::Tensor StreamWeights(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& scales,
                         const at::Tensor& bias) {
  at::Tensor out = at::empty({input.size(0), weight.size(0)}, input.options());
  const cuda::Int4LinearParams params{input.data_ptr(),
                                      weight.data_ptr<uint8_t>(),
                                      scales.data_ptr<float>(),
                                      bias.defined() ? bias.data_ptr() : nullptr,
                                      out.data_ptr(),
                                      static_cast<int>(input.size(0)),
                                      static_cast<int>(weight.size(0)),
                                      static_cast<int>(2 * weight.size(1)),
                                      static_cast<int>(scales.size(1)),
                                      HasZeroPoints(scales),
                                      input.scalar_type() == at::kBFloat16};
  const cudaError_t error = cuda::LaunchInt4Linear(params, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(error == cudaSuccess, "int4 linear: ", cudaGetErrorString(error));
  return out;
}

}  // namespace

bool Int4LinearCudaApplies(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale) {
  return WidthsFit(weight, weight_scale) && input.is_cuda() && input.device() == weight.device() && input.dim() == 2 &&
         input.size(1) == 2 * weight.size(1) && input.size(0) >= 1 &&
         (input.scalar_type() == at::kFloat || input.scalar_type() == at::kBFloat16);
}

at::Tensor Int4LinearCuda(const at::Tensor& input_in, const at::Tensor& weight, const at::Tensor& scale_in,
                          const c10::optional<at::Tensor>& bias_in) {
  TORCH_CHECK(Int4LinearCudaApplies(input_in, weight, scale_in), "int4 linear: shapes or devices it cannot take");
  const c10::cuda::CUDAGuard device_guard(input_in.device());
  // A fresh contiguous copy where the input is not one: the kernel loads 16 bytes of a row at a time.
  at::Tensor input = input_in.contiguous();
  if (reinterpret_cast<uintptr_t>(input.data_ptr()) % 16 != 0) input = input.clone();
  const at::Tensor scales = scale_in.to(at::kFloat).contiguous();
  at::Tensor bias;
  if (bias_in.has_value() && bias_in->defined()) {
    TORCH_CHECK(bias_in->numel() == weight.size(0), "int4 linear: bias needs ", weight.size(0), " values");
    bias = bias_in->to(input.options()).contiguous();
  }
  if (input.size(0) <= cuda::kInt4LinearMaxRows) return StreamWeights(input, weight, scales, bias);
  return MultiplyDequantizedSlices(input, weight.size(0), bias, [&](int64_t first, int64_t count, at::Tensor& slice) {
    DequantizeRows(weight, scales, first, count, slice);
  });
}

bool DequantizeInt4CudaApplies(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype) {
  return WidthsFit(weight, weight_scale) && (dtype == at::kFloat || dtype == at::kBFloat16);
}

at::Tensor DequantizeInt4Cuda(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype) {
  TORCH_CHECK(DequantizeInt4CudaApplies(weight, weight_scale, dtype), "int4 dequantize: shapes it cannot take");
  const c10::cuda::CUDAGuard device_guard(weight.device());
  at::Tensor out = at::empty({weight.size(0), 2 * weight.size(1)}, weight.options().dtype(dtype));
  DequantizeRows(weight, weight_scale.to(at::kFloat).contiguous(), 0, weight.size(0), out);
  return out;
}

}  // namespace llmc::model
