// The CUDA int8 matrix product against cuBLAS on bfloat16 weights, decode-sized batches, side by side in one
// run: per weight shape, and whole decode steps (every linear layer of a model, its LM head included) replayed
// as CUDA graphs. Needs only the CUDA toolkit (scripts/gpu-check-int8.sh builds and runs it on a GPU machine).
//   llmc_int8_cuda_bench [--quick]
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "worker/model/int8_linear_cuda_kernels.h"

namespace {

using llmc::model::cuda::Int8LinearParams;
using llmc::model::cuda::Int8LinearPath;

#define CHECK_CUDA(call)                                                                              \
  do {                                                                                                \
    const cudaError_t status_ = (call);                                                               \
    if (status_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

#define CHECK_CUBLAS(call)                                                                                        \
  do {                                                                                                            \
    const cublasStatus_t status_ = (call);                                                                        \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, static_cast<int>(status_)); \
      std::exit(1);                                                                                               \
    }                                                                                                             \
  } while (0)

__device__ inline uint32_t Hash(uint64_t i) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(z ^ (z >> 29));
}

__global__ void FillInt8(int8_t* out, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<int8_t>(Hash(seed + i));
}

__global__ void FillBf16(__nv_bfloat16* out, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(static_cast<float>(static_cast<int8_t>(Hash(seed + i))) / 256.f);
}

__global__ void FillFloat(float* out, size_t count, float value) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = value;
}

constexpr int kMaxRows = llmc::model::cuda::kInt8LinearMaxRows;
// Prefill-sized batches, which the operator runs as dequantize + cuBLAS.
constexpr int kMaxPrefillRows = 512;

struct Matrix {
  int columns = 0, k_size = 0;
  int8_t* weight8 = nullptr;
  float* scales = nullptr;
  __nv_bfloat16* weight16 = nullptr;
};

enum class Variant { kInt8TensorCores, kInt8CudaCoresBf16, kInt8CudaCoresFloat, kBf16Cublas, kDequantizeCublas };
const char* const kVariantNames[] = {"int8 tensor cores", "int8 CUDA cores (bf16 x)", "int8 CUDA cores (f32 x)",
                                     "bf16 cuBLAS", "dequantize + cuBLAS"};

struct Context {
  cublasHandle_t cublas{};
  cudaStream_t stream{};
  void* workspace = nullptr;
  __nv_bfloat16* x16 = nullptr;
  float* x32 = nullptr;
  float* out32 = nullptr;
  __nv_bfloat16* out16 = nullptr;
  __nv_bfloat16* dequantized = nullptr;
};

void Enqueue(const Context& context, Variant variant, const Matrix& m, int rows) {
  const float one = 1, zero = 0;
  switch (variant) {
    case Variant::kInt8TensorCores:
    case Variant::kInt8CudaCoresBf16:
    case Variant::kInt8CudaCoresFloat: {
      const bool bf16 = variant != Variant::kInt8CudaCoresFloat;
      const Int8LinearParams params{bf16 ? static_cast<const void*>(context.x16) : context.x32,
                                    m.weight8,
                                    m.scales,
                                    nullptr,
                                    bf16 ? static_cast<void*>(context.out16) : context.out32,
                                    rows,
                                    m.columns,
                                    m.k_size,
                                    1,
                                    bf16};
      CHECK_CUDA(llmc::model::cuda::LaunchInt8Linear(
          params, context.stream,
          variant == Variant::kInt8TensorCores ? Int8LinearPath::kTensorCores : Int8LinearPath::kCudaCores));
      return;
    }
    case Variant::kDequantizeCublas:
      // What the operator does beyond the streamed rows (int8_linear_cuda.cc), here a whole matrix at a time.
      CHECK_CUDA(llmc::model::cuda::LaunchDequantizeInt8(m.weight8, m.scales, m.columns, m.k_size, 1,
                                                         context.dequantized, true, context.stream));
      [[fallthrough]];
    case Variant::kBf16Cublas:
      CHECK_CUBLAS(cublasGemmEx(context.cublas, CUBLAS_OP_T, CUBLAS_OP_N, m.columns, rows, m.k_size, &one,
                                variant == Variant::kBf16Cublas ? m.weight16 : context.dequantized, CUDA_R_16BF,
                                m.k_size, context.x16, CUDA_R_16BF, m.k_size, &zero, context.out16, CUDA_R_16BF,
                                m.columns, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      return;
  }
}

// Mean microseconds of one replay of a graph holding `variant` over every matrix in `matrices`.
double TimeGraph(const Context& context, Variant variant, const std::vector<const Matrix*>& matrices, int rows,
                 int replays) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(context.stream, cudaStreamCaptureModeThreadLocal));
  for (const Matrix* m : matrices) Enqueue(context, variant, *m, rows);
  CHECK_CUDA(cudaStreamEndCapture(context.stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK_CUDA(cudaGraphLaunch(exec, context.stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, context.stream));
  for (int i = 0; i < replays; ++i) CHECK_CUDA(cudaGraphLaunch(exec, context.stream));
  CHECK_CUDA(cudaEventRecord(stop, context.stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  return 1000.0 * ms / replays;
}

struct Model {
  std::string name;
  int layers;
  std::vector<std::pair<int, int>> layer_shapes;  // columns x K of each linear layer, in order
  std::pair<int, int> head;
};

struct BuiltModel {
  std::vector<std::vector<Matrix>> layers;
  Matrix head;
  std::vector<void*> allocations;
};

Matrix MakeMatrix(int columns, int k_size, uint64_t seed, std::vector<void*>& allocations) {
  Matrix m{columns, k_size};
  const size_t count = static_cast<size_t>(columns) * k_size;
  CHECK_CUDA(cudaMalloc(&m.weight8, count));
  CHECK_CUDA(cudaMalloc(&m.weight16, count * 2));
  CHECK_CUDA(cudaMalloc(&m.scales, columns * sizeof(float)));
  allocations.insert(allocations.end(), {m.weight8, m.weight16, m.scales});
  FillInt8<<<1024, 256>>>(m.weight8, count, seed);
  FillBf16<<<1024, 256>>>(m.weight16, count, seed);
  FillFloat<<<64, 256>>>(m.scales, columns, 1.f / 512);
  return m;
}

BuiltModel Build(const Model& model) {
  BuiltModel built;
  uint64_t seed = 1;
  for (int layer = 0; layer < model.layers; ++layer) {
    built.layers.emplace_back();
    for (const auto& [columns, k_size] : model.layer_shapes)
      built.layers.back().push_back(MakeMatrix(columns, k_size, seed++ << 40, built.allocations));
  }
  built.head = MakeMatrix(model.head.first, model.head.second, seed << 40, built.allocations);
  CHECK_CUDA(cudaDeviceSynchronize());
  return built;
}

double PeakCopyBandwidth() {
  const size_t bytes = size_t{1} << 31;
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < 5; ++i) CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  return 5.0 * 2 * bytes / (ms / 1000) / 1e9;  // read + write
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp properties{};
  CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
  const double copy_gbps = PeakCopyBandwidth();
  std::printf("device: %s, %d SMs, compute %d.%d, %.0f MiB; device-to-device copy %.0f GB/s (read + write)\n",
              properties.name, properties.multiProcessorCount, properties.major, properties.minor,
              properties.totalGlobalMem / 1048576.0, copy_gbps);

  Context context;
  CHECK_CUBLAS(cublasCreate(&context.cublas));
  CHECK_CUDA(cudaStreamCreateWithFlags(&context.stream, cudaStreamNonBlocking));
  CHECK_CUBLAS(cublasSetStream(context.cublas, context.stream));
  const size_t workspace_bytes = size_t{64} << 20;
  CHECK_CUDA(cudaMalloc(&context.workspace, workspace_bytes));
  CHECK_CUBLAS(cublasSetWorkspace(context.cublas, context.workspace, workspace_bytes));
  const size_t max_k = 14336, max_columns = 152064;
  CHECK_CUDA(cudaMalloc(&context.x16, kMaxPrefillRows * max_k * 2));
  CHECK_CUDA(cudaMalloc(&context.x32, kMaxRows * max_k * 4));
  CHECK_CUDA(cudaMalloc(&context.out32, kMaxRows * max_columns * 4));
  CHECK_CUDA(cudaMalloc(&context.out16, kMaxPrefillRows * max_columns * 2));
  CHECK_CUDA(cudaMalloc(&context.dequantized, max_columns * size_t{4096} * 2));
  FillBf16<<<256, 256>>>(context.x16, kMaxPrefillRows * max_k, 99);
  FillFloat<<<256, 256>>>(context.x32, kMaxRows * max_k, 0.25f);

  // The matrices as llmc's exporter lays them out: q, k and v stacked in one, gate and up in one.
  const std::vector<Model> models = {
      {"Qwen2-0.5B", 24, {{1152, 896}, {896, 896}, {9728, 896}, {896, 4864}}, {151936, 896}},
      {"Llama-3-8B", 32, {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}, {128256, 4096}},
  };
  // --quick: the int8 kernel and cuBLAS alone, fewer row counts and replays.
  const std::vector<int> row_counts = quick ? std::vector<int>{1, 8, 16} : std::vector<int>{1, 2, 4, 8, 16, 32};
  const std::vector<Variant> variants =
      quick ? std::vector<Variant>{Variant::kInt8TensorCores, Variant::kBf16Cublas}
            : std::vector<Variant>{Variant::kInt8TensorCores, Variant::kInt8CudaCoresBf16, Variant::kInt8CudaCoresFloat,
                                   Variant::kBf16Cublas, Variant::kDequantizeCublas};
  const int replays = quick ? 5 : 20;

  for (const Model& model : models) {
    BuiltModel built = Build(model);
    std::printf(
        "\n== %s: %d layers, per-matrix microseconds (mean over the model's copies of that shape, one "
        "graph each) ==\n",
        model.name.c_str(), model.layers);
    std::printf("%-14s %4s", "columns x K", "rows");
    for (const Variant v : variants) std::printf(" %24s", kVariantNames[static_cast<int>(v)]);
    std::printf(" %12s %16s\n", "int8 GB/s", "bf16/int8 (tc)");
    std::vector<std::pair<int, int>> shapes;
    for (const auto& shape : model.layer_shapes)
      if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) shapes.push_back(shape);
    shapes.push_back(model.head);
    for (const auto& shape : shapes) {
      std::vector<const Matrix*> copies;
      if (shape == model.head) {
        copies.push_back(&built.head);
      } else {
        for (const auto& layer : built.layers)
          for (const Matrix& m : layer)
            if (m.columns == shape.first && m.k_size == shape.second) copies.push_back(&m);
      }
      for (const int rows : row_counts) {
        std::printf("%6d x %-6d %4d", shape.first, shape.second, rows);
        double times[5];
        for (const Variant v : variants) {
          times[static_cast<int>(v)] = TimeGraph(context, v, copies, rows, replays) / copies.size();
          std::printf(" %24.2f", times[static_cast<int>(v)]);
        }
        const double bytes = static_cast<double>(shape.first) * shape.second;
        std::printf(" %12.0f %16.2f\n", bytes / (times[0] * 1e-6) / 1e9, times[3] / times[0]);
      }
    }
    std::printf("\n-- %s decode step, every linear layer and the LM head in one graph (microseconds) --\n",
                model.name.c_str());
    std::vector<const Matrix*> step;
    double int8_bytes = 0;
    for (const auto& layer : built.layers)
      for (const Matrix& m : layer) step.push_back(&m), int8_bytes += static_cast<double>(m.columns) * m.k_size;
    step.push_back(&built.head);
    int8_bytes += static_cast<double>(built.head.columns) * built.head.k_size;
    std::printf("%4s", "rows");
    for (const Variant v : variants) std::printf(" %24s", kVariantNames[static_cast<int>(v)]);
    std::printf(" %16s %18s %18s\n", "bf16/int8 (tc)", "int8 % of copy BW", "bf16 % of copy BW");
    for (const int rows : row_counts) {
      double times[5];
      std::printf("%4d", rows);
      for (const Variant v : variants) {
        times[static_cast<int>(v)] = TimeGraph(context, v, step, rows, replays);
        std::printf(" %24.1f", times[static_cast<int>(v)]);
      }
      // The copy figure counts reads and writes; a product only reads its weights.
      const double int8_limit_us = int8_bytes / (copy_gbps * 1e9) * 1e6;
      std::printf(" %16.2f %17.0f%% %17.0f%%\n", times[3] / times[0], 100 * int8_limit_us / times[0],
                  100 * 2 * int8_limit_us / times[3]);
    }
    if (!quick) {
      std::printf("\n-- %s prefill-sized step, every linear layer and the LM head in one graph (microseconds) --\n",
                  model.name.c_str());
      std::printf("%4s %24s %24s %16s\n", "rows", kVariantNames[static_cast<int>(Variant::kDequantizeCublas)],
                  kVariantNames[static_cast<int>(Variant::kBf16Cublas)], "int8/bf16 time");
      for (const int rows : {64, 128, kMaxPrefillRows}) {
        const double dequantized = TimeGraph(context, Variant::kDequantizeCublas, step, rows, replays);
        const double bf16 = TimeGraph(context, Variant::kBf16Cublas, step, rows, replays);
        std::printf("%4d %24.1f %24.1f %16.2f\n", rows, dequantized, bf16, dequantized / bf16);
      }
    }
    for (void* p : built.allocations) CHECK_CUDA(cudaFree(p));
  }
  return 0;
}
