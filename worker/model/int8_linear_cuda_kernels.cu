#include <cuda_bf16.h>

#include <mutex>

#include "worker/model/int8_linear_cuda_kernels.h"

namespace llmc::model::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kCudaCoreWarpsPerBlock = 8;

// Adds the bias and stores in x's dtype.
__device__ inline void Store(const Int8LinearParams& p, int row, int column, float value) {
  const int64_t index = static_cast<int64_t>(row) * p.columns + column;
  if (p.x_is_bf16) {
    if (p.bias != nullptr) value += __bfloat162float(static_cast<const __nv_bfloat16*>(p.bias)[column]);
    static_cast<__nv_bfloat16*>(p.out)[index] = __float2bfloat16_rn(value);
  } else {
    if (p.bias != nullptr) value += static_cast<const float*>(p.bias)[column];
    static_cast<float*>(p.out)[index] = value;
  }
}

// ---- float32 (or unaligned) activations: CUDA cores, exact float arithmetic ----

// Rows each pass of a warp keeps in registers; a launch covers up to kInt8LinearMaxRows in passes.
constexpr int kRowsPerPass = 8;

__device__ inline float WarpSum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ inline float LoadX(const Int8LinearParams& p, int row, int k) {
  const int64_t index = static_cast<int64_t>(row) * p.k_size + k;
  if (p.x_is_bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p.x)[index]);
  return static_cast<const float*>(p.x)[index];
}

// One warp per output column: its lanes stream the column's int8 weights 16 bytes at a time (each chunk of
// 16 lies in one scale group), every weight read once for all rows of a pass; a warp sum per row at the end.
__global__ void Int8LinearCudaCoreKernel(Int8LinearParams p) {
  const int column = blockIdx.x * kCudaCoreWarpsPerBlock + threadIdx.x / kWarpSize;
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
      if (lane == 0 && first_row + r < p.rows) Store(p, first_row + r, column, total);
    }
  }
}

// ---- bfloat16 activations: tensor cores (mma m16n8k16, sm_80 and later) ----
//
// The product is computed transposed, out^T = W · x^T: a 16-column tile of W is the mma's A operand (16 x 16
// per step), eight rows of x its B operand, so every row of a decode batch shares one read of the weights.
// A warp owns a 64-wide slice of K per chunk; lane (g = lane / 4, t = lane % 4) loads 16 consecutive bytes of
// W's columns g and g + 8 at k = chunk * 64 + 16 t, and the same 16 consecutive values of x's row g. The dot
// product does not care in which order K is summed, so step s of the four mma steps takes, as logical k
// {2t, 2t+1, 2t+8, 2t+9}, the physical k {16t + 4s + 0..3}: A and B see the same permutation, and every
// load is one 16-byte vector. The warps of a block split K and add their partial tiles in shared memory
// in a fixed order.
//
// Two shapes of block, chosen by the number of columns (LaunchTensorCore):
//  - many columns (the LM head, wide MLP projections): 8 warps over two tiles, so lanes reuse their x for
//    twice the weights; the column blocks alone give every multiprocessor at least one block, whose warps keep
//    enough loads in flight, at few registers a thread.
//  - few columns and long K (attention, down projections): one tile and 4 to 32 / row groups warps
//    splitting K, as many as bring the grid to kNarrowWarpsPerMultiprocessor, each loading its next chunk
//    before it multiplies the current one, so that a few dozen blocks still have much of the matrix in
//    flight at once.

constexpr int kTileColumns = 16;
constexpr int kChunkK = 64;
constexpr int kWideBlockWarps = 8;
// Warps per multiprocessor a grid of one-tile blocks aims at (with at least 4 a block): on an H200, 16 ran
// 4096 x 4096 in 7.7 us where 32 took 9.5 and 64 9.5, with no loss on the other shapes.
constexpr int kNarrowWarpsPerMultiprocessor = 16;
// Warps a block may have: 16 KiB (one tile) or 32 KiB (two) of partial tiles, and at 1024 threads 64
// registers a thread.
constexpr int MaxWarps(int row_groups, int tiles) { return tiles == 2 ? kWideBlockWarps : 32 / row_groups; }

// Biased byte i of `biased` (weight + 128) as the float weight: 2^23 + byte, minus 2^23 + 128, exactly.
__device__ inline float ByteAsFloat(uint32_t biased, int i) {
  return __uint_as_float(__byte_perm(biased, 0x4B000000u, 0x7440u | i)) - 8388736.0f;
}

// Bytes 2h and 2h + 1 of a word of four int8 weights as a bfloat16 pair; small integers are exact in
// bfloat16, so taking the upper half of each float loses nothing.
__device__ inline uint32_t ExactPair(uint32_t word, int h) {
  const uint32_t biased = word ^ 0x80808080u;
  return __byte_perm(__float_as_uint(ByteAsFloat(biased, 2 * h)), __float_as_uint(ByteAsFloat(biased, 2 * h + 1)),
                     0x7632u);
}

// The same pair times a group scale, rounded to bfloat16.
__device__ inline uint32_t ScaledPair(uint32_t word, int h, float scale) {
  const uint32_t biased = word ^ 0x80808080u;
  const __nv_bfloat162 pair =
      __floats2bfloat162_rn(ByteAsFloat(biased, 2 * h) * scale, ByteAsFloat(biased, 2 * h + 1) * scale);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

__device__ inline uint32_t Word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

__device__ inline void MmaBf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // never launched: ChooseInt8LinearPath reads the kernel's PTX version first
#endif
}

// 16 bytes of weights, read once: not kept in L1, and each miss brings the surrounding 256 bytes into L2,
// where the warps working on the next chunks of the same columns find them (on an H200, 4096 x 14336 in
// 22.3 us instead of 25.7).
__device__ inline uint4 LoadWeights(const int8_t* address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(address));
  return v;
#else
  return __ldcs(reinterpret_cast<const uint4*>(address));
#endif
}

// What one lane loads for one 64-wide chunk: W's columns g and g + 8 of each tile, x's row g of each group
// of eight rows, and the group scales when there are several per column. Zeros past K, the columns or rows.
template <int kRowGroups, int kTiles>
struct Chunk {
  uint4 w[kTiles][2];
  uint4 x[kRowGroups][2];
  float scale[kTiles][2];

  __device__ void Load(const Int8LinearParams& p, int chunk, int chunks, int block_column, int g, int t) {
    const int k = chunk * kChunkK + t * 16;
    const bool k_valid = chunk < chunks && k < p.k_size;
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int column = block_column + i * kTileColumns + h * 8 + g;
        const bool valid = k_valid && column < p.columns;
        w[i][h] = valid ? LoadWeights(p.weight + static_cast<int64_t>(column) * p.k_size + k) : make_uint4(0, 0, 0, 0);
        scale[i][h] =
            valid && p.groups > 1 ? p.scales[static_cast<int64_t>(column) * p.groups + k / (p.k_size / p.groups)] : 0.f;
      }
    }
    const auto* x_rows = static_cast<const __nv_bfloat16*>(p.x);
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r) {
      const int row = r * 8 + g;
      if (k_valid && row < p.rows) {
        const uint4* source = reinterpret_cast<const uint4*>(x_rows + static_cast<int64_t>(row) * p.k_size + k);
        x[r][0] = __ldg(source);
        x[r][1] = __ldg(source + 1);
      } else {
        x[r][0] = x[r][1] = make_uint4(0, 0, 0, 0);
      }
    }
  }

  __device__ void MultiplyInto(float (&acc)[kTiles][kRowGroups][4], bool per_channel) const {
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        const uint32_t low = Word(w[i][0], s), high = Word(w[i][1], s);
        uint32_t a[4];
        if (per_channel) {
          a[0] = ExactPair(low, 0), a[1] = ExactPair(high, 0), a[2] = ExactPair(low, 1), a[3] = ExactPair(high, 1);
        } else {
          a[0] = ScaledPair(low, 0, scale[i][0]), a[1] = ScaledPair(high, 0, scale[i][1]);
          a[2] = ScaledPair(low, 1, scale[i][0]), a[3] = ScaledPair(high, 1, scale[i][1]);
        }
#pragma unroll
        for (int r = 0; r < kRowGroups; ++r) {
          const uint4& xs = x[r][s / 2];
          MmaBf16(acc[i][r], a, Word(xs, (s % 2) * 2), Word(xs, (s % 2) * 2 + 1));
        }
      }
    }
  }
};

// blockDim.x / 32 warps (at most MaxWarps) over kTiles * 16 columns; dynamic shared memory holds
// warps * kTiles * kRowGroups * 4 * 32 floats.
template <int kRowGroups, int kTiles>
__global__ void __launch_bounds__(MaxWarps(kRowGroups, kTiles) * kWarpSize)
    Int8LinearTensorCoreKernel(Int8LinearParams p) {
  const int warps = blockDim.x / kWarpSize, warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int block_column = blockIdx.x * kTileColumns * kTiles;
  const bool per_channel = p.groups == 1;
  const int chunks = (p.k_size + kChunkK - 1) / kChunkK;

  float acc[kTiles][kRowGroups][4] = {};
  if constexpr (kTiles == 1) {
    Chunk<kRowGroups, kTiles> current, next;
    current.Load(p, warp, chunks, block_column, g, t);
    for (int chunk = warp; chunk < chunks; chunk += warps) {
      next.Load(p, chunk + warps, chunks, block_column, g, t);
      current.MultiplyInto(acc, per_channel);
      current = next;
    }
  } else {
    for (int chunk = warp; chunk < chunks; chunk += warps) {
      Chunk<kRowGroups, kTiles> current;
      current.Load(p, chunk, chunks, block_column, g, t);
      current.MultiplyInto(acc, per_channel);
    }
  }

  // acc[i][r][c]: column block_column + 16 i + g + 8 (c / 2), row 8 r + 2 t + c % 2.
  constexpr int kValues = kTiles * kRowGroups * 4;
  extern __shared__ float partial[];  // [warps][kValues][32]
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c)
        partial[(warp * kValues + (i * kRowGroups + r) * 4 + c) * kWarpSize + lane] = acc[i][r][c];
    }
  }
  __syncthreads();
  for (int index = threadIdx.x; index < kValues * kWarpSize; index += blockDim.x) {
    const int value = index / kWarpSize, source_lane = index % kWarpSize;
    float total = 0;
    for (int from = 0; from < warps; ++from) total += partial[(from * kValues + value) * kWarpSize + source_lane];
    const int i = value / (kRowGroups * 4), r = value / 4 % kRowGroups, c = value % 4;
    const int column = block_column + i * kTileColumns + source_lane / 4 + 8 * (c / 2);
    const int row = r * 8 + 2 * (source_lane % 4) + c % 2;
    if (column < p.columns && row < p.rows) Store(p, row, column, per_channel ? total * p.scales[column] : total);
  }
}

// What the launches need to know of the current device (the caller's CUDAGuard picks it), looked up once.
struct DeviceTraits {
  int multiprocessors = 1;
  // The tensor-core kernel runs here as sm_80+ code: a build for older targets only (JIT-compiled from
  // their PTX) leaves the mma out.
  bool bf16_tensor_cores = false;
};

const DeviceTraits& CurrentDeviceTraits() {
  constexpr int kMaxDevices = 64;
  static std::once_flag looked_up[kMaxDevices];
  static DeviceTraits traits[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) device = 0;
  std::call_once(looked_up[device], [device] {
    DeviceTraits& found = traits[device];
    int multiprocessors = 0, major = 0;
    if (cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
        multiprocessors > 0) {
      found.multiprocessors = multiprocessors;
    }
    cudaFuncAttributes attributes{};
    found.bf16_tensor_cores =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaFuncGetAttributes(&attributes, Int8LinearTensorCoreKernel<1, 1>) == cudaSuccess && major >= 8 &&
        attributes.ptxVersion >= 80;
  });
  return traits[device];
}

// Whether the tensor-core path takes these activations on the current device.
bool TensorCoresTake(const void* x, bool x_is_bf16) {
  return x_is_bf16 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && CurrentDeviceTraits().bf16_tensor_cores;
}

template <int kRowGroups, int kTiles>
void LaunchTensorCore(const Int8LinearParams& params, cudaStream_t stream) {
  const int column_blocks = (params.columns + kTileColumns * kTiles - 1) / (kTileColumns * kTiles);
  const int chunks = (params.k_size + kChunkK - 1) / kChunkK;
  constexpr int kMaxWarps = MaxWarps(kRowGroups, kTiles);
  int warps = kMaxWarps;
  if constexpr (kTiles == 1) {
    // About kNarrowWarpsPerMultiprocessor warps over the whole grid.
    const int wanted =
        (CurrentDeviceTraits().multiprocessors * kNarrowWarpsPerMultiprocessor + column_blocks - 1) / column_blocks;
    warps = wanted < 4 ? 4 : wanted > kMaxWarps ? kMaxWarps : wanted;
  }
  if (warps > chunks) warps = chunks;
  const size_t shared_bytes = sizeof(float) * warps * kTiles * kRowGroups * 4 * kWarpSize;
  Int8LinearTensorCoreKernel<kRowGroups, kTiles><<<column_blocks, warps * kWarpSize, shared_bytes, stream>>>(params);
}

template <int kTiles>
void LaunchTensorCoreRows(const Int8LinearParams& params, cudaStream_t stream) {
  static_assert(kInt8LinearMaxRows == 32, "row groups below cover 32 rows");
  switch ((params.rows + 7) / 8) {
    case 1:
      LaunchTensorCore<1, kTiles>(params, stream);
      break;
    case 2:
      LaunchTensorCore<2, kTiles>(params, stream);
      break;
    case 3:
      LaunchTensorCore<3, kTiles>(params, stream);
      break;
    default:
      LaunchTensorCore<4, kTiles>(params, stream);
      break;
  }
}

// ---- dequantizing for cuBLAS ----

// Each thread takes 16 weights at a time (one 16-byte load, all in one scale group) and writes 16 values.
template <bool kBf16>
__global__ void DequantizeInt8Kernel(const int8_t* weight, const float* scales, int k_size, int group_size, int groups,
                                     size_t chunks, void* out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t chunk = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; chunk < chunks; chunk += stride) {
    const size_t first = chunk * 16;
    const size_t column = first / k_size;
    const int k = static_cast<int>(first - column * k_size);
    const float scale = scales[column * groups + k / group_size];
    const int4 packed = *reinterpret_cast<const int4*>(weight + first);
    const int8_t* w = reinterpret_cast<const int8_t*>(&packed);
    if constexpr (kBf16) {
      __align__(16) __nv_bfloat16 values[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) values[i] = __float2bfloat16_rn(static_cast<float>(w[i]) * scale);
      uint4* destination = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(out) + first);
      destination[0] = reinterpret_cast<const uint4*>(values)[0];
      destination[1] = reinterpret_cast<const uint4*>(values)[1];
    } else {
      float4* destination = reinterpret_cast<float4*>(static_cast<float*>(out) + first);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        destination[i] =
            make_float4(w[4 * i] * scale, w[4 * i + 1] * scale, w[4 * i + 2] * scale, w[4 * i + 3] * scale);
      }
    }
  }
}

}  // namespace

cudaError_t LaunchDequantizeInt8(const int8_t* weight, const float* scales, int columns, int k_size, int groups,
                                 void* out, bool out_is_bf16, cudaStream_t stream) {
  if (!Int8WeightsFit(weight, columns, k_size, groups) || reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const size_t chunks = static_cast<size_t>(columns) * k_size / 16;
  constexpr int kThreads = 256;
  // Enough blocks to fill every multiprocessor several times over; the loop covers the rest.
  const size_t wanted = (chunks + kThreads - 1) / kThreads;
  const size_t most = static_cast<size_t>(CurrentDeviceTraits().multiprocessors) * 16;
  const int blocks = static_cast<int>(wanted < most ? wanted : most);
  if (out_is_bf16) {
    DequantizeInt8Kernel<true>
        <<<blocks, kThreads, 0, stream>>>(weight, scales, k_size, k_size / groups, groups, chunks, out);
  } else {
    DequantizeInt8Kernel<false>
        <<<blocks, kThreads, 0, stream>>>(weight, scales, k_size, k_size / groups, groups, chunks, out);
  }
  return cudaGetLastError();
}

int Int8LinearRowLimit(const void* x, bool x_is_bf16) {
  return TensorCoresTake(x, x_is_bf16) ? kInt8LinearMaxRows : kInt8LinearCudaCoreRowLimit;
}

Int8LinearPath ChooseInt8LinearPath(const Int8LinearParams& params) {
  return TensorCoresTake(params.x, params.x_is_bf16) ? Int8LinearPath::kTensorCores : Int8LinearPath::kCudaCores;
}

cudaError_t LaunchInt8Linear(const Int8LinearParams& params, cudaStream_t stream, Int8LinearPath path) {
  if (params.rows <= 0 || params.rows > kInt8LinearMaxRows ||
      !Int8WeightsFit(params.weight, params.columns, params.k_size, params.groups)) {
    return cudaErrorInvalidValue;
  }
  if (path == Int8LinearPath::kTensorCores) {
    if (!TensorCoresTake(params.x, params.x_is_bf16)) return cudaErrorInvalidValue;
    // Wide blocks once there is at least one per multiprocessor (measured on an H200: 4864 x 896 and wider
    // run faster so, 4096 x 4096 and narrower slower).
    if ((params.columns + 2 * kTileColumns - 1) / (2 * kTileColumns) >= CurrentDeviceTraits().multiprocessors) {
      LaunchTensorCoreRows<2>(params, stream);
    } else {
      LaunchTensorCoreRows<1>(params, stream);
    }
    return cudaGetLastError();
  }
  const int blocks = (params.columns + kCudaCoreWarpsPerBlock - 1) / kCudaCoreWarpsPerBlock;
  Int8LinearCudaCoreKernel<<<blocks, kCudaCoreWarpsPerBlock * kWarpSize, 0, stream>>>(params);
  return cudaGetLastError();
}

cudaError_t LaunchInt8Linear(const Int8LinearParams& params, cudaStream_t stream) {
  return LaunchInt8Linear(params, stream, ChooseInt8LinearPath(params));
}

}  // namespace llmc::model::cuda
