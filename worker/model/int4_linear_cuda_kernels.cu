// The CUDA W4A16 kernels of int4_linear_cuda_kernels.h.
#include <cuda_bf16.h>

#include "worker/model/int4_linear_cuda_kernels.h"

namespace llmc::model::cuda {
namespace {

constexpr int kWarpSize = 32;
// Inputs one lane takes per step: 16 bytes of packed weights.
constexpr int kLaneInputs = 32;
constexpr int kProductWarps = 8;

// 16 bytes read once: kept out of L1, where nothing would read them again.
__device__ inline uint4 LoadPacked(const uint8_t* address) { return __ldcs(reinterpret_cast<const uint4*>(address)); }

__device__ inline uint32_t Word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// A little-endian word of four packed bytes holds eight consecutive inputs, input j in bits 4j..4j+3.
__device__ inline float Nibble(uint32_t word, int j) { return static_cast<float>((word >> (4 * j)) & 0xFu); }

// Group g of column `column`: its scale, and the nibble value that stands for zero.
__device__ inline void GroupOf(const float* scales, bool zero_points, int groups, int column, int g, float& scale,
                               float& zero) {
  const int64_t index = static_cast<int64_t>(column) * groups + g;
  if (zero_points) {
    scale = scales[2 * index];
    zero = scales[2 * index + 1];
  } else {
    scale = scales[index];
    zero = 8.f;
  }
}

// Eight activations of row `row` from input k (a multiple of 8) on, as floats.
template <bool kBf16>
__device__ inline void LoadEight(const void* x, int k_size, int row, int k, float (&values)[8]) {
  if constexpr (kBf16) {
    const auto* base = static_cast<const __nv_bfloat16*>(x) + static_cast<int64_t>(row) * k_size + k;
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(base));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t pair = Word(raw, i);
      values[2 * i] = __uint_as_float(pair << 16);
      values[2 * i + 1] = __uint_as_float(pair & 0xFFFF0000u);
    }
  } else {
    const auto* base = static_cast<const float*>(x) + static_cast<int64_t>(row) * k_size + k;
    const float4 low = __ldg(reinterpret_cast<const float4*>(base));
    const float4 high = __ldg(reinterpret_cast<const float4*>(base) + 1);
    values[0] = low.x, values[1] = low.y, values[2] = low.z, values[3] = low.w;
    values[4] = high.x, values[5] = high.y, values[6] = high.z, values[7] = high.w;
  }
}

// One warp per column: each lane takes 32 inputs (one 16-byte load of weights) a step, sums (u - z) * x for
// each row in float, scales the sum once for its group, and the warp adds its lanes together at the end.
template <int kRows, bool kBf16>
__global__ void __launch_bounds__(kProductWarps* kWarpSize) Int4LinearKernel(Int4LinearParams p) {
  const int lane = threadIdx.x % kWarpSize;
  const int column = blockIdx.x * kProductWarps + threadIdx.x / kWarpSize;
  if (column >= p.columns) return;
  const uint8_t* packed = p.weight + static_cast<int64_t>(column) * (p.k_size / 2);
  const int group_size = p.k_size / p.groups;
  float acc[kRows] = {};
  for (int k = lane * kLaneInputs; k < p.k_size; k += kWarpSize * kLaneInputs) {
    const uint4 weights = LoadPacked(packed + k / 2);
    float scale, zero;
    GroupOf(p.scales, p.zero_points, p.groups, column, k / group_size, scale, zero);
    float sums[kRows] = {};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t word = Word(weights, w);
      float centred[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) centred[j] = Nibble(word, j) - zero;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= p.rows) break;
        float x[8];
        LoadEight<kBf16>(p.x, p.k_size, r, k + 8 * w, x);
#pragma unroll
        for (int j = 0; j < 8; ++j) sums[r] = fmaf(centred[j], x[j], sums[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = fmaf(sums[r], scale, acc[r]);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) acc[r] += __shfl_xor_sync(0xFFFFFFFFu, acc[r], offset);
  }
  if (lane != 0) return;
  for (int r = 0; r < p.rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * p.columns + column;
    if constexpr (kBf16) {
      float value = acc[r];
      if (p.bias != nullptr) value += __bfloat162float(static_cast<const __nv_bfloat16*>(p.bias)[column]);
      static_cast<__nv_bfloat16*>(p.out)[at] = __float2bfloat16_rn(value);
    } else {
      float value = acc[r];
      if (p.bias != nullptr) value += static_cast<const float*>(p.bias)[column];
      static_cast<float*>(p.out)[at] = value;
    }
  }
}

// One thread per 16 bytes of weights (32 outputs), over the whole matrix.
template <bool kBf16>
__global__ void DequantizeInt4Kernel(const uint8_t* weight, const float* scales, bool zero_points, int k_size,
                                     int groups, size_t chunks, void* out) {
  const int chunks_per_column = k_size / kLaneInputs, group_size = k_size / groups;
  for (size_t chunk = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; chunk < chunks;
       chunk += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int column = static_cast<int>(chunk / chunks_per_column);
    const int k = static_cast<int>(chunk % chunks_per_column) * kLaneInputs;
    const uint4 weights = LoadPacked(weight + chunk * (kLaneInputs / 2));
    float scale, zero;
    GroupOf(scales, zero_points, groups, column, k / group_size, scale, zero);
    const int64_t first = static_cast<int64_t>(column) * k_size + k;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t word = Word(weights, w);
      if constexpr (kBf16) {
        uint32_t pairs[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const __nv_bfloat162 pair =
              __floats2bfloat162_rn((Nibble(word, 2 * j) - zero) * scale, (Nibble(word, 2 * j + 1) - zero) * scale);
          pairs[j] = *reinterpret_cast<const uint32_t*>(&pair);
        }
        reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(out) + first)[w] =
            make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
      } else {
        float4* target = reinterpret_cast<float4*>(static_cast<float*>(out) + first + 8 * w);
        target[0] = make_float4((Nibble(word, 0) - zero) * scale, (Nibble(word, 1) - zero) * scale,
                                (Nibble(word, 2) - zero) * scale, (Nibble(word, 3) - zero) * scale);
        target[1] = make_float4((Nibble(word, 4) - zero) * scale, (Nibble(word, 5) - zero) * scale,
                                (Nibble(word, 6) - zero) * scale, (Nibble(word, 7) - zero) * scale);
      }
    }
  }
}

template <int kRows>
void LaunchRows(const Int4LinearParams& p, cudaStream_t stream) {
  const int blocks = (p.columns + kProductWarps - 1) / kProductWarps;
  if (p.x_is_bf16) {
    Int4LinearKernel<kRows, true><<<blocks, kProductWarps * kWarpSize, 0, stream>>>(p);
  } else {
    Int4LinearKernel<kRows, false><<<blocks, kProductWarps * kWarpSize, 0, stream>>>(p);
  }
}

}  // namespace

cudaError_t LaunchInt4Linear(const Int4LinearParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.rows > kInt4LinearMaxRows || !Int4WeightsFit(p.weight, p.columns, p.k_size, p.groups) ||
      reinterpret_cast<uintptr_t>(p.x) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  // Rows round up to a kernel that takes them: the loops stop at p.rows.
  static_assert(kInt4LinearMaxRows == 4, "one instantiation per row count below");
  if (p.rows == 1) {
    LaunchRows<1>(p, stream);
  } else if (p.rows == 2) {
    LaunchRows<2>(p, stream);
  } else {
    LaunchRows<4>(p, stream);
  }
  return cudaGetLastError();
}

cudaError_t LaunchDequantizeInt4(const uint8_t* weight, const float* scales, bool zero_points, int columns, int k_size,
                                 int groups, void* out, bool out_is_bf16, cudaStream_t stream) {
  if (!Int4WeightsFit(weight, columns, k_size, groups) || reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const size_t chunks = static_cast<size_t>(columns) * (k_size / kLaneInputs);
  constexpr int kThreads = 256;
  constexpr size_t kMostBlocks = 4096;  // the loop covers the rest
  const size_t wanted = (chunks + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < kMostBlocks ? wanted : kMostBlocks);
  if (out_is_bf16) {
    DequantizeInt4Kernel<true>
        <<<blocks, kThreads, 0, stream>>>(weight, scales, zero_points, k_size, groups, chunks, out);
  } else {
    DequantizeInt4Kernel<false>
        <<<blocks, kThreads, 0, stream>>>(weight, scales, zero_points, k_size, groups, chunks, out);
  }
  return cudaGetLastError();
}

}  // namespace llmc::model::cuda
