#ifndef LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_H_
#define LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_H_

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

namespace llmc::model {

// Whether the CUDA int8 kernel takes `input @ dequantized(weight)^T`: CUDA tensors, a decode-sized batch
// (int8_linear_cuda_kernels.h), widths it supports. Otherwise the composite dequantizes for cuBLAS.
bool Int8LinearCudaApplies(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale);

// [rows, N] in input's dtype = input [rows, K] @ (weight int8 [N, K] * weight_scale [N, G])^T + bias [N],
// summed in float and rounded once.
at::Tensor Int8LinearCuda(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const c10::optional<at::Tensor>& bias = c10::nullopt);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_H_
