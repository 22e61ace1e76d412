#ifndef LLMC_WORKER_MODEL_INT4_LINEAR_CUDA_KERNELS_H_
#define LLMC_WORKER_MODEL_INT4_LINEAR_CUDA_KERNELS_H_

// Weight-only int4 (W4A16) on CUDA: a matrix product for decode-sized batches that reads the packed weights
// once for all rows, and the dequantizer that larger batches use for cuBLAS. Raw device pointers, no libtorch
// types, so nvcc compiles them where libtorch has no CUDA. The torch-facing glue is int4_linear_cuda.cc; the
// packing is int4_weight.h's: byte i of a column holds inputs 2i (low nibble) and 2i + 1 (high nibble) as u in
// 0..15, and W[n][k] = (u - z) * scale, z = 8 for symmetric groups, else the group's zero point.

#include <cuda_runtime.h>

#include <cstdint>

namespace llmc::model::cuda {

// out[m][n] = sum_k x[m][k] * W[n][k] (+ bias[n]), summed in float and stored in x's dtype.
struct Int4LinearParams {
  const void* x;          // [rows, k_size], float32 or bfloat16 (x_is_bf16), on a 16-byte boundary
  const uint8_t* weight;  // [columns, k_size / 2], row-major, on a 16-byte boundary
  const float* scales;    // [columns, groups], or [columns, groups, 2] (scale, zero point) with zero_points
  const void* bias;       // [columns] in x's dtype, or null
  void* out;              // [rows, columns] in x's dtype
  int rows;               // 1..kInt4LinearMaxRows
  int columns;
  int k_size;  // a multiple of 32, cut by the groups into multiples of 32
  int groups;
  bool zero_points;
  bool x_is_bf16;
};

// Whether packed weights [columns, k_size / 2] with `groups` groups per column meet the contract of both the
// product and the dequantizer: sizes that fit an int, each group a multiple of 32 inputs (a 16-byte load never
// spans two groups), the weights on a 16-byte boundary.
inline bool Int4WeightsFit(const uint8_t* weight, int64_t columns, int64_t k_size, int64_t groups) {
  return columns > 0 && columns <= INT32_MAX && k_size > 0 && k_size <= INT32_MAX && groups > 0 &&
         k_size % groups == 0 && (k_size / groups) % 32 == 0 && reinterpret_cast<uintptr_t>(weight) % 16 == 0;
}

// Rows one launch takes. The product runs on CUDA cores in float arithmetic, so its time grows with every
// row; beyond this the glue dequantizes a slice at a time for cuBLAS's tensor cores. Not yet measured on a
// GPU: the int8 kernel's CUDA-core path lost to dequantizing from its second row on an H200 (a bfloat16 step
// of Llama-3-8B: 8.5 ms at one row, 16.2 at two, 20.0 dequantized), and int4 reads half the bytes, so both
// the streaming and the dequantizing sides of that comparison shift; four rows is the guess until then.
inline constexpr int kInt4LinearMaxRows = 4;

// cudaErrorInvalidValue for shapes outside the contract above.
cudaError_t LaunchInt4Linear(const Int4LinearParams& params, cudaStream_t stream);

// out[n][k] = W[n][k] rounded once to out's dtype, in one pass over the weights. out is [columns, k_size],
// bfloat16 (out_is_bf16) or float32, on a 16-byte boundary; the weights' contract as above.
cudaError_t LaunchDequantizeInt4(const uint8_t* weight, const float* scales, bool zero_points, int columns, int k_size,
                                 int groups, void* out, bool out_is_bf16, cudaStream_t stream);

}  // namespace llmc::model::cuda

#endif  // LLMC_WORKER_MODEL_INT4_LINEAR_CUDA_KERNELS_H_
