#ifndef LLMC_WORKER_MODEL_INT4_LINEAR_CUDA_H_
#define LLMC_WORKER_MODEL_INT4_LINEAR_CUDA_H_

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

namespace llmc::model {

// Whether Int4LinearCuda takes `input @ W^T` for packed int4 weights (uint8 [N, K / 2] with float32 scales
// [N, G] or, with zero points, [N, G, 2]; int4_weight.h): CUDA tensors on one device, float32 or bfloat16
// activations, groups of a multiple of 32 inputs (int4_linear_cuda_kernels.h). Otherwise the composite
// dequantizes with torch operators.
bool Int4LinearCudaApplies(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale);

// [rows, N] in input's dtype = input [rows, K] @ W^T + bias [N]. Needs Int4LinearCudaApplies. Up to
// kInt4LinearMaxRows rows stream the packed weights once and sum in float, rounding once; more dequantize a
// slice of W at a time to input's dtype for cuBLAS, as a model stored in that dtype would be.
at::Tensor Int4LinearCuda(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const c10::optional<at::Tensor>& bias = c10::nullopt);

// Whether DequantizeInt4Cuda takes these: CUDA tensors, float32 or bfloat16 out, the kernels' widths.
bool DequantizeInt4CudaApplies(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype);

// W [N, K] as dtype, in one pass on the GPU.
at::Tensor DequantizeInt4Cuda(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_INT4_LINEAR_CUDA_H_
