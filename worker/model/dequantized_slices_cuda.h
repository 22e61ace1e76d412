#ifndef LLMC_WORKER_MODEL_DEQUANTIZED_SLICES_CUDA_H_
#define LLMC_WORKER_MODEL_DEQUANTIZED_SLICES_CUDA_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>

namespace llmc::model {

// Writes weight rows [first, first + count), dequantized, into the start of `slice` ([>= count, K] in the
// activations' dtype, on a 16-byte boundary).
using DequantizeWeightRows = std::function<void(int64_t first, int64_t count, at::Tensor& slice)>;

// input [rows, K] @ W^T (+ bias [columns] in input's dtype, or undefined) for a quantized W [columns, K] on
// CUDA, beyond the rows a streaming kernel takes: a slice of W dequantized at a time, each multiplied by cuBLAS
// straight into its columns of the output, so that a prefill through a large LM head needs a bounded buffer
// rather than a dequantized copy of the whole head. With the bias in the product's epilogue, each output is
// rounded once.
at::Tensor MultiplyDequantizedSlices(const at::Tensor& input, int64_t columns, const at::Tensor& bias,
                                     const DequantizeWeightRows& dequantize_rows);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_DEQUANTIZED_SLICES_CUDA_H_
