// The torch-facing side of the CUDA int8 matrix product (int8_linear_cuda_kernels.h). Built only when
// libtorch has CUDA (LLMC_WITH_CUDA).
#include "worker/model/int8_linear_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "worker/model/int8_linear_cuda_kernels.h"

namespace llmc::model {

bool Int8LinearCudaApplies(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale) {
  const bool shapes_fit =
      input.is_cuda() && weight.is_cuda() && input.device() == weight.device() &&
      weight_scale.device() == weight.device() && weight.scalar_type() == at::kChar && weight.dim() == 2 &&
      input.dim() == 2 && input.size(1) == weight.size(1) && input.size(0) >= 1 && weight.is_contiguous() &&
      reinterpret_cast<uintptr_t>(weight.data_ptr()) % 16 == 0 &&
      (input.scalar_type() == at::kFloat || input.scalar_type() == at::kBFloat16) && weight.size(1) > 0 &&
      weight.size(1) % 16 == 0 && weight_scale.dim() == 2 && weight_scale.size(0) == weight.size(0) &&
      weight.size(1) % weight_scale.size(1) == 0 && (weight.size(1) / weight_scale.size(1)) % 16 == 0;
  if (!shapes_fit) return false;
  // A contiguous input keeps its address (and so its alignment); another is copied to a fresh one.
  const void* x = input.is_contiguous() ? input.data_ptr() : nullptr;
  const c10::cuda::CUDAGuard device_guard(input.device());
  return input.size(0) <= cuda::Int8LinearRowLimit(x, input.scalar_type() == at::kBFloat16);
}

at::Tensor Int8LinearCuda(const at::Tensor& input_in, const at::Tensor& weight_in, const at::Tensor& scale_in,
                          const c10::optional<at::Tensor>& bias_in) {
  const c10::cuda::CUDAGuard device_guard(input_in.device());
  const at::Tensor input = input_in.contiguous(), weight = weight_in.contiguous();
  const at::Tensor scales = scale_in.to(at::kFloat).contiguous();
  at::Tensor bias;
  if (bias_in.has_value() && bias_in->defined()) {
    TORCH_CHECK(bias_in->numel() == weight.size(0), "int8 linear: bias needs ", weight.size(0), " values");
    bias = bias_in->to(input.options()).contiguous();
  }
  at::Tensor out = at::empty({input.size(0), weight.size(0)}, input.options());
  const cuda::Int8LinearParams params{input.data_ptr(),
                                      weight.data_ptr<int8_t>(),
                                      scales.data_ptr<float>(),
                                      bias.defined() ? bias.data_ptr() : nullptr,
                                      out.data_ptr(),
                                      static_cast<int>(input.size(0)),
                                      static_cast<int>(weight.size(0)),
                                      static_cast<int>(weight.size(1)),
                                      static_cast<int>(scales.size(1)),
                                      input.scalar_type() == at::kBFloat16};
  const cudaError_t error = cuda::LaunchInt8Linear(params, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(error == cudaSuccess, "int8 linear: ", cudaGetErrorString(error));
  return out;
}

}  // namespace llmc::model
