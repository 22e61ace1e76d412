#ifndef LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_H_
#define LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_H_

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

namespace llmc::model {

// Whether Int8LinearCuda takes `input @ dequantized(weight)^T`: CUDA tensors on one device, float32 or
// bfloat16 activations, widths the kernels support (int8_linear_cuda_kernels.h). Otherwise the composite
// dequantizes with torch operators.
bool Int8LinearCudaApplies(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale);

// Whether these activations are few enough for the int8 kernel, which reads each weight once a launch: up to
// its 32 rows (one row for float32 activations), or two launches for a large matrix on tensor cores. Beyond
// them Int8LinearCuda dequantizes a slice of the weights at a time for cuBLAS.
bool Int8LinearCudaStreamsWeights(const at::Tensor& input, const at::Tensor& weight);

// [rows, N] in input's dtype = input [rows, K] @ (weight int8 [N, K] * weight_scale [N, G])^T + bias [N]. Needs
// Int8LinearCudaApplies. Streamed, it sums in float and rounds once; otherwise the dequantized weights are
// rounded to input's dtype first, as a model stored in that dtype would be.
at::Tensor Int8LinearCuda(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const c10::optional<at::Tensor>& bias = c10::nullopt);

// Whether DequantizeInt8Cuda takes these: CUDA tensors, float32 or bfloat16 out, the kernels' widths.
bool DequantizeInt8CudaApplies(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype);

// weight int8 [N, K] * weight_scale [N, G] as dtype, in one pass on the GPU.
at::Tensor DequantizeInt8Cuda(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_H_
