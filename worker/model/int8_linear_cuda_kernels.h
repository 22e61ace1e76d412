#ifndef LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_KERNELS_H_
#define LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_KERNELS_H_

// A weight-only int8 matrix product for decode-sized batches on CUDA, and the dequantizer that larger
// batches use for cuBLAS: raw device pointers, no libtorch types, so nvcc compiles them where libtorch has no
// CUDA (CI checks it that way). The torch-facing glue, which picks between them, is int8_linear_cuda.cc.

#include <cuda_runtime.h>

#include <cstdint>

namespace llmc::model::cuda {

// out[m][n] = sum_k x[m][k] * weight[n][k] * scales[n][k / (k_size / groups)] (+ bias[n]), summed in float
// and stored in x's dtype.
struct Int8LinearParams {
  const void* x;         // [rows, k_size], float32 or bfloat16 (x_is_bf16)
  const int8_t* weight;  // [columns, k_size], row-major, on a 16-byte boundary
  const float* scales;   // [columns, groups]
  const void* bias;      // [columns] in x's dtype, or null
  void* out;             // [rows, columns] in x's dtype
  int rows;              // at most kInt8LinearMaxRows
  int columns;
  int k_size;  // a multiple of 16; k_size / groups a multiple of 16
  int groups;
  bool x_is_bf16;
};

// Whether int8 weights [columns, k_size] at `weight`, with `groups` scales per column, meet the contract of
// both the product and the dequantizer: sizes that fit an int, k_size a multiple of 16 and cut by the groups
// into multiples of 16 (a 16-byte load never spans two scales), the weights on a 16-byte boundary.
inline bool Int8WeightsFit(const int8_t* weight, int64_t columns, int64_t k_size, int64_t groups) {
  return columns > 0 && columns <= INT32_MAX && k_size > 0 && k_size <= INT32_MAX && k_size % 16 == 0 && groups > 0 &&
         k_size % groups == 0 && (k_size / groups) % 16 == 0 && reinterpret_cast<uintptr_t>(weight) % 16 == 0;
}

// Rows one launch takes on either path.
inline constexpr int kInt8LinearMaxRows = 32;
// Rows worth sending to the CUDA-core path: its time grows with every row. On an H200 a Llama-3-8B step
// took 8.5 ms at one row and 16.2 at two with bfloat16 activations, 15.8 and 30.6 with float32, against
// 20.0 for dequantizing every weight for cuBLAS (docs/performance.md): one row wins with both.
inline constexpr int kInt8LinearCudaCoreRowLimit = 1;

// kTensorCores: bfloat16 activations on 16-byte boundaries, sm_80 or later (bfloat16 mma, float sums).
// kCudaCores: anything else, float arithmetic throughout.
enum class Int8LinearPath { kTensorCores, kCudaCores };
Int8LinearPath ChooseInt8LinearPath(const Int8LinearParams& params);

// The most rows one launch of the product is worth on the current device, on the path these activations
// get (int8_linear_cuda.cc's Int8LinearCudaStreamsWeights decides what goes beyond).
int Int8LinearRowLimit(const void* x, bool x_is_bf16);

// cudaErrorInvalidValue for shapes outside the contract above, or a path that cannot take these params.
cudaError_t LaunchInt8Linear(const Int8LinearParams& params, cudaStream_t stream, Int8LinearPath path);
cudaError_t LaunchInt8Linear(const Int8LinearParams& params, cudaStream_t stream);

// Beyond the rows the product takes, the caller multiplies dequantized weights with cuBLAS: out[n][k] =
// weight[n][k] * scales[n][k / (k_size / groups)], rounded once to out's dtype, in one pass over the weights.
// out is [columns, k_size], bfloat16 (out_is_bf16) or float32, on a 16-byte boundary; weight as for the
// product, and the same contract on k_size and groups. cudaErrorInvalidValue outside it.
cudaError_t LaunchDequantizeInt8(const int8_t* weight, const float* scales, int columns, int k_size, int groups,
                                 void* out, bool out_is_bf16, cudaStream_t stream);

}  // namespace llmc::model::cuda

#endif  // LLMC_WORKER_MODEL_INT8_LINEAR_CUDA_KERNELS_H_
