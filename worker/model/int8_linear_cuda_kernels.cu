#include <cuda_bf16.h>

#include "worker/model/int8_linear_cuda_kernels.h"

namespace llmc::model::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
// Rows each pass of a warp keeps in registers; a launch covers up to kInt8LinearMaxRows in passes.
constexpr int kRowsPerPass = 8;

__device__ inline float WarpSum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ inline float LoadX(const Int8LinearParams& p, int row, int k) {
  if (p.x_is_bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p.x)[row * p.k_size + k]);
  return static_cast<const float*>(p.x)[row * p.k_size + k];
}

// One warp per output column: its lanes stream the column's int8 weights 16 bytes at a time (each chunk of
// 16 lies in one scale group), every weight read once for all rows of a pass; a warp sum per row at the end.
__global__ void Int8LinearKernel(Int8LinearParams p) {
  const int column = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (column >= p.columns) return;
  const int8_t* weights = p.weight + static_cast<int64_t>(column) * p.k_size;
  const float* scales = p.scales + static_cast<int64_t>(column) * p.groups;
  const int group_size = p.k_size / p.groups;
  for (int first_row = 0; first_row < p.rows; first_row += kRowsPerPass) {
    float sums[kRowsPerPass] = {};
    for (int k0 = lane * 16; k0 < p.k_size; k0 += kWarpSize * 16) {
      const int4 packed = *reinterpret_cast<const int4*>(weights + k0);
      const int8_t* w = reinterpret_cast<const int8_t*>(&packed);
      const float scale = scales[k0 / group_size];
#pragma unroll
      for (int r = 0; r < kRowsPerPass; ++r) {
        if (first_row + r >= p.rows) break;
        float dot = 0;
#pragma unroll
        for (int i = 0; i < 16; ++i) dot += LoadX(p, first_row + r, k0 + i) * static_cast<float>(w[i]);
        sums[r] += dot * scale;
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      const float total = WarpSum(sums[r]);
      if (lane == 0 && first_row + r < p.rows) p.out[static_cast<int64_t>(first_row + r) * p.columns + column] = total;
    }
  }
}

}  // namespace

cudaError_t LaunchInt8Linear(const Int8LinearParams& params, cudaStream_t stream) {
  if (params.rows <= 0 || params.rows > kInt8LinearMaxRows || params.k_size % 16 != 0 || params.groups <= 0 ||
      (params.k_size / params.groups) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const int blocks = (params.columns + kWarpsPerBlock - 1) / kWarpsPerBlock;
  Int8LinearKernel<<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace llmc::model::cuda
