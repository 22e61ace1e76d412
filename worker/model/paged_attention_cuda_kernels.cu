#include <cuda_bf16.h>

#include "worker/model/paged_attention_cuda_kernels.h"

namespace llmc::model::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kMaxElementsPerLane = 8;  // head_dim up to 256

__device__ inline float ToFloat(float value) { return value; }
__device__ inline float ToFloat(__nv_bfloat16 value) { return __bfloat162float(value); }
template <typename T>
__device__ inline T FromFloat(float value);
template <>
__device__ inline float FromFloat<float>(float value) {
  return value;
}
template <>
__device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float value) {
  return __float2bfloat16(value);
}

__device__ inline float WarpSum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// One thread block per (query row, head). Each warp walks a strided share of the row's context with an
// online softmax, lanes splitting head_dim; the warps' partial results are merged at the end. Nothing is
// sized by the context length, so long contexts need no extra shared memory.
template <typename T>
__global__ void PagedAttentionKernel(PagedAttentionParams p) {
  const int row = blockIdx.x / p.num_heads, head = blockIdx.x % p.num_heads;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int per_lane = p.head_dim / kWarpSize;
  const int sequence = p.row_sequence[row];
  const int context = p.row_position[row] + 1;
  const T* query = static_cast<const T*>(p.query) + (static_cast<int64_t>(row) * p.num_heads + head) * p.head_dim;
  const T* keys = static_cast<const T*>(p.key_cache);
  const T* values = static_cast<const T*>(p.value_cache);

  float q[kMaxElementsPerLane], accumulator[kMaxElementsPerLane];
  for (int i = 0; i < per_lane; ++i) {
    q[i] = ToFloat(query[lane + i * kWarpSize]) * p.scale;
    accumulator[i] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  const int64_t block_stride = static_cast<int64_t>(p.block_size) * p.num_kv_heads * p.head_dim;
  // A window starts the walk at its first position: the positions before it are never read.
  const int first = p.window > 0 ? max(0, context - p.window) : 0;
  for (int position = first + warp; position < context; position += kWarpsPerBlock) {
    const int block = p.block_tables[static_cast<int64_t>(sequence) * p.max_blocks + position / p.block_size];
    const int64_t offset =
        block * block_stride + (static_cast<int64_t>(position % p.block_size) * p.num_kv_heads + kv_head) * p.head_dim;
    float dot = 0.0f;
    for (int i = 0; i < per_lane; ++i) dot += q[i] * ToFloat(keys[offset + lane + i * kWarpSize]);
    dot = WarpSum(dot);
    const float new_max = fmaxf(running_max, dot);
    const float correction = __expf(running_max - new_max);
    const float weight = __expf(dot - new_max);
    running_sum = running_sum * correction + weight;
    for (int i = 0; i < per_lane; ++i) {
      accumulator[i] = accumulator[i] * correction + weight * ToFloat(values[offset + lane + i * kWarpSize]);
    }
    running_max = new_max;
  }

  __shared__ float warp_max[kWarpsPerBlock], warp_sum[kWarpsPerBlock];
  __shared__ float warp_accumulator[kWarpsPerBlock][kMaxElementsPerLane * kWarpSize];
  if (lane == 0) {
    warp_max[warp] = running_max;
    warp_sum[warp] = running_sum;
  }
  for (int i = 0; i < per_lane; ++i) warp_accumulator[warp][lane + i * kWarpSize] = accumulator[i];
  __syncthreads();
  if (warp != 0) return;
  // A sink counts once, in the merge: a key of logit sinks[head] and value zero.
  float total_max = p.sinks != nullptr ? p.sinks[head] : -INFINITY;
  for (int w = 0; w < kWarpsPerBlock; ++w) total_max = fmaxf(total_max, warp_max[w]);
  float total_sum = p.sinks != nullptr ? __expf(p.sinks[head] - total_max) : 0.0f;
  float merged[kMaxElementsPerLane] = {};
  for (int w = 0; w < kWarpsPerBlock; ++w) {
    if (warp_sum[w] == 0.0f) continue;  // a warp that saw no position
    const float factor = __expf(warp_max[w] - total_max);
    total_sum += warp_sum[w] * factor;
    for (int i = 0; i < per_lane; ++i) merged[i] += warp_accumulator[w][lane + i * kWarpSize] * factor;
  }
  T* out = static_cast<T*>(p.out) + (static_cast<int64_t>(row) * p.num_heads + head) * p.head_dim;
  for (int i = 0; i < per_lane; ++i) out[lane + i * kWarpSize] = FromFloat<T>(merged[i] / total_sum);
}

template <typename T>
__global__ void WriteKvCacheKernel(WriteKvCacheParams p) {
  const int token = blockIdx.x;
  const int64_t slot = p.slot_mapping[token];
  const T* key = static_cast<const T*>(p.key) + static_cast<int64_t>(token) * p.row_elements;
  const T* value = static_cast<const T*>(p.value) + static_cast<int64_t>(token) * p.row_elements;
  T* key_cache = static_cast<T*>(p.key_cache) + slot * p.row_elements;
  T* value_cache = static_cast<T*>(p.value_cache) + slot * p.row_elements;
  for (int i = threadIdx.x; i < p.row_elements; i += blockDim.x) {
    key_cache[i] = key[i];
    value_cache[i] = value[i];
  }
}

}  // namespace

cudaError_t LaunchPagedAttention(const PagedAttentionParams& params, cudaStream_t stream) {
  if (params.head_dim % kWarpSize != 0 || params.head_dim > kMaxElementsPerLane * kWarpSize) {
    return cudaErrorInvalidValue;
  }
  if (params.num_rows == 0) return cudaSuccess;
  const dim3 grid(params.num_rows * params.num_heads), block(kWarpsPerBlock * kWarpSize);
  if (params.element_type == ElementType::kFloat32) {
    PagedAttentionKernel<float><<<grid, block, 0, stream>>>(params);
  } else {
    PagedAttentionKernel<__nv_bfloat16><<<grid, block, 0, stream>>>(params);
  }
  return cudaGetLastError();
}

cudaError_t LaunchWriteKvCache(const WriteKvCacheParams& params, cudaStream_t stream) {
  if (params.num_tokens == 0) return cudaSuccess;
  const dim3 grid(params.num_tokens), block(128);
  if (params.element_type == ElementType::kFloat32) {
    WriteKvCacheKernel<float><<<grid, block, 0, stream>>>(params);
  } else {
    WriteKvCacheKernel<__nv_bfloat16><<<grid, block, 0, stream>>>(params);
  }
  return cudaGetLastError();
}

}  // namespace llmc::model::cuda
