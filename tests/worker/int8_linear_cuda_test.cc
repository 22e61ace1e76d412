// [gpu]: the CUDA int8 matrix product (worker/model/int8_linear_cuda_kernels.h) on both of its paths
// against a float64 reference, on random shapes. Needs only the CUDA runtime, no libtorch, so it builds
// wherever nvcc is and runs on any machine with a GPU (scripts/gpu-check-int8.sh).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cuda_device_buffer.h"
#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/int8_linear_cuda_kernels.h"

namespace llmc::model::cuda {
namespace {

// The CPU kernels' round-to-nearest-even conversions, header-only.
using cpu::attention_detail::Bf16ToFloat;
using cpu::attention_detail::FloatToBf16;

using testing::DeviceBuffer;
using testing::DeviceOutput;
using testing::HaveGpu;

struct Case {
  int rows, columns, k_size, groups;
  bool bf16;
  bool bias = false;
  size_t x_byte_offset = 0;  // 2: bfloat16 activations off their 16-byte boundary
};

struct Outcome {
  double worst_excess = 0;  // max over outputs of |got - want| - bound; <= 0 passes
  cudaError_t launch = cudaSuccess;
};

// Runs one case on `path` and compares with float64 sums of the exact inputs (plus the bias). Bounds: float sums of
// exact products on CUDA cores; tensor cores sum in float too, but looser than IEEE rounding; with group scales they
// take weight * scale rounded to bfloat16 (relative error up to 2^-9 a term). A misplaced operand errs by about sqrt(K)
// terms, far past any of these bounds.
Outcome Run(const Case& c, Int8LinearPath path, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<int8_t> weight(static_cast<size_t>(c.columns) * c.k_size);
  for (int8_t& w : weight) w = static_cast<int8_t>(byte(random));
  std::vector<float> scales(static_cast<size_t>(c.columns) * c.groups);
  for (float& s : scales) s = std::exp(normal(random)) / 127.f;
  std::vector<float> x(static_cast<size_t>(c.rows) * c.k_size);
  for (float& v : x) v = normal(random) * 3.f;
  std::vector<uint16_t> x_bf16(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x_bf16[i] = FloatToBf16(x[i]);
    if (c.bf16) x[i] = Bf16ToFloat(x_bf16[i]);
  }

  std::vector<float> bias(c.bias ? c.columns : 0);
  for (float& b : bias) b = c.bf16 ? Bf16ToFloat(FloatToBf16(normal(random))) : normal(random);
  std::vector<uint16_t> bias_bf16(bias.size());
  for (size_t i = 0; i < bias.size(); ++i) bias_bf16[i] = FloatToBf16(bias[i]);

  DeviceBuffer<int8_t> weight_device(weight);
  DeviceBuffer<float> scales_device(scales);
  DeviceBuffer<float> x_float_device(x);
  DeviceBuffer<uint16_t> x_bf16_device(x_bf16, c.x_byte_offset);
  DeviceBuffer<float> bias_float_device(bias);
  DeviceBuffer<uint16_t> bias_bf16_device(bias_bf16);
  // Output in x's dtype.
  const DeviceOutput out_device(static_cast<size_t>(c.rows) * c.columns, c.bf16);
  const void* bias_device =
      c.bias ? (c.bf16 ? static_cast<const void*>(bias_bf16_device.data) : bias_float_device.data) : nullptr;
  const Int8LinearParams params{c.bf16 ? static_cast<const void*>(x_bf16_device.data) : x_float_device.data,
                                weight_device.data,
                                scales_device.data,
                                bias_device,
                                out_device.data(),
                                c.rows,
                                c.columns,
                                c.k_size,
                                c.groups,
                                c.bf16};
  Outcome outcome;
  outcome.launch = LaunchInt8Linear(params, nullptr, path);
  if (outcome.launch != cudaSuccess) return outcome;
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> out = out_device.ToFloats();

  const int group_size = c.k_size / c.groups;
  const bool rounded_weights = path == Int8LinearPath::kTensorCores && c.groups > 1;
  outcome.worst_excess = -INFINITY;
  for (int row = 0; row < c.rows; ++row) {
    for (int column = 0; column < c.columns; ++column) {
      double want = 0, magnitude = 0;
      for (int k = 0; k < c.k_size; ++k) {
        const double term = static_cast<double>(x[static_cast<size_t>(row) * c.k_size + k]) *
                            weight[static_cast<size_t>(column) * c.k_size + k] *
                            scales[static_cast<size_t>(column) * c.groups + k / group_size];
        want += term;
        magnitude += std::fabs(term);
      }
      if (c.bias) want += bias[column], magnitude += std::fabs(bias[column]);
      const double relative = rounded_weights ? 1.0 / 256 : path == Int8LinearPath::kTensorCores ? 1e-4 : 1e-5;
      // A bfloat16 result is rounded once more, by at most 2^-9 of itself.
      const double bound = magnitude * relative + (c.bf16 ? std::fabs(want) / 256 : 0) + 1e-6;
      const double got = out[static_cast<size_t>(row) * c.columns + column];
      const double excess = std::isfinite(got) ? std::fabs(got - want) - bound : INFINITY;
      outcome.worst_excess = std::max(outcome.worst_excess, excess);
    }
  }
  return outcome;
}

int ComputeCapabilityMajor() {
  int device = 0, major = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess);
  return major;
}

alignas(16) const uint16_t kAlignedActivations[32] = {};

// Whether this build runs the tensor-core path on this GPU (sm_80 or later with sm_80+ code built; the
// default LLMC_CUDA_ARCHITECTURES and scripts/gpu-check-int8.sh's -arch=native both have it).
bool TensorCoresHere() {
  const Int8LinearParams aligned_bf16{kAlignedActivations, nullptr, nullptr, nullptr, nullptr, 1, 1, 16, 1, true};
  return ChooseInt8LinearPath(aligned_bf16) == Int8LinearPath::kTensorCores;
}

TEST_CASE("gpu: CUDA int8 linear equals a float64 reference on both paths", "[gpu]") {
  REQUIRE(HaveGpu());
  std::mt19937 random(7);
  std::vector<Case> cases;
  // Every row count the kernels take, odd column counts and K not a multiple of the 64-wide chunk.
  for (int rows = 1; rows <= kInt8LinearMaxRows; ++rows) {
    const int k_size = 16 * (1 + static_cast<int>(random() % 40));
    const int columns = 1 + static_cast<int>(random() % 97);
    cases.push_back({rows, columns, k_size, 1, rows % 2 == 0, rows % 3 == 0});
  }
  // Group scales: group sizes 16 to 128, several groups per 64-wide chunk and several chunks per group.
  for (const auto& [k_size, groups] : {std::pair{896, 7}, {896, 56}, {896, 28}, {80, 5}, {256, 2}, {4864, 38}}) {
    for (const int rows : {1, 5, 8, 17, 32}) cases.push_back({rows, 45, k_size, groups, true, rows == 5});
    cases.push_back({3, 33, k_size, groups, false, true});
  }
  // Qwen2-0.5B's widths, per channel; its LM head's width takes two tiles a block.
  for (const auto& [columns, k_size] : {std::pair{896, 896}, {128, 896}, {4864, 896}, {896, 4864}}) {
    for (const int rows : {1, 16, 32}) cases.push_back({rows, columns, k_size, 1, true, columns == 128});
  }
  for (const int rows : {1, 9, 20, 32}) cases.push_back({rows, 151936, 64, 1, true, rows == 9});
  cases.push_back({2, 20000, 128, 2, true});
  // bfloat16 activations off a 16-byte boundary: the CUDA-core path takes them.
  cases.push_back({4, 50, 96, 1, true, true, 2});

  const bool tensor_cores_here = TensorCoresHere();
  int tensor_core_cases = 0;
  for (size_t index = 0; index < cases.size(); ++index) {
    const Case& c = cases[index];
    for (const Int8LinearPath path : {Int8LinearPath::kCudaCores, Int8LinearPath::kTensorCores}) {
      const bool tensor_cores = path == Int8LinearPath::kTensorCores;
      INFO("rows " << c.rows << " columns " << c.columns << " K " << c.k_size << " groups " << c.groups
                   << (c.bf16 ? " bf16" : " float") << (c.bias ? " bias" : "") << " offset " << c.x_byte_offset
                   << (tensor_cores ? " tensor cores" : " CUDA cores"));
      const Outcome outcome = Run(c, path, static_cast<uint32_t>(index));
      if (tensor_cores && (!c.bf16 || c.x_byte_offset != 0 || !tensor_cores_here)) {
        CHECK(outcome.launch == cudaErrorInvalidValue);
        cudaGetLastError();
        continue;
      }
      REQUIRE(outcome.launch == cudaSuccess);
      CHECK(outcome.worst_excess <= 0);
      tensor_core_cases += tensor_cores;
    }
  }
  CHECK((tensor_core_cases > 0) == tensor_cores_here);
}

TEST_CASE("gpu: CUDA int8 linear picks tensor cores for aligned bfloat16 activations only", "[gpu]") {
  REQUIRE(HaveGpu());
  // Ampere and later have bfloat16 tensor cores; a build without sm_80 code for them is a build error here.
  INFO("compute capability " << ComputeCapabilityMajor() << ".x");
  CHECK(TensorCoresHere() == (ComputeCapabilityMajor() >= 8));
  Int8LinearParams params{kAlignedActivations, nullptr, nullptr, nullptr, nullptr, 1, 1, 16, 1, true};
  params.x = kAlignedActivations + 1;
  CHECK(ChooseInt8LinearPath(params) == Int8LinearPath::kCudaCores);
  params.x = kAlignedActivations;
  params.x_is_bf16 = false;
  CHECK(ChooseInt8LinearPath(params) == Int8LinearPath::kCudaCores);
}

TEST_CASE("gpu: CUDA int8 linear is worth up to 32 rows on tensor cores and one row on CUDA cores", "[gpu]") {
  REQUIRE(HaveGpu());
  CHECK(Int8LinearRowLimit(kAlignedActivations, true) == (TensorCoresHere() ? kInt8LinearMaxRows : 1));
  CHECK(Int8LinearRowLimit(kAlignedActivations + 1, true) == kInt8LinearCudaCoreRowLimit);
  CHECK(Int8LinearRowLimit(kAlignedActivations, false) == kInt8LinearCudaCoreRowLimit);
  CHECK(kInt8LinearCudaCoreRowLimit == 1);
}

TEST_CASE("gpu: CUDA int8 linear refuses shapes outside its contract", "[gpu]") {
  REQUIRE(HaveGpu());
  const std::vector<int8_t> weight(64 * 64);
  DeviceBuffer<int8_t> weight_device(weight);
  DeviceBuffer<float> scales_device(std::vector<float>(64 * 4, 1.f));
  DeviceBuffer<uint16_t> x_device(std::vector<uint16_t>(64 * 64));
  DeviceBuffer<float> out_device(std::vector<float>(64 * 64));
  const Int8LinearParams good{
      x_device.data, weight_device.data, scales_device.data, nullptr, out_device.data, 1, 64, 64, 1, true};
  REQUIRE(LaunchInt8Linear(good, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (const auto& [name, mutate] : std::vector<std::pair<const char*, void (*)(Int8LinearParams&)>>{
           {"no rows", [](Int8LinearParams& p) { p.rows = 0; }},
           {"more rows than the kernels take", [](Int8LinearParams& p) { p.rows = kInt8LinearMaxRows + 1; }},
           {"K not a multiple of 16", [](Int8LinearParams& p) { p.k_size = 40; }},
           {"group of 8", [](Int8LinearParams& p) { p.groups = 8; }},
           {"groups not dividing K", [](Int8LinearParams& p) { p.groups = 3; }},
           {"weights off a 16-byte boundary", [](Int8LinearParams& p) { p.weight += 1; }}}) {
    INFO(name);
    Int8LinearParams params = good;
    mutate(params);
    CHECK(LaunchInt8Linear(params, nullptr) == cudaErrorInvalidValue);
  }
}

// Every weight * scale rounded once (float32, then to bfloat16 to nearest even), bit for bit, over random shapes
// and group sizes, and one matrix of more 16-weight chunks than the grid has threads (so its threads loop); NaN
// until written, so a value left out fails too.
TEST_CASE("gpu: CUDA int8 dequantize equals weight times scale rounded once", "[gpu]") {
  REQUIRE(HaveGpu());
  std::mt19937 random(29);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int trial = 0; trial < 25; ++trial) {
    const bool large = trial == 24;  // 9000 x 1024: 576 K chunks, past 16 blocks of 256 on 132 multiprocessors
    const int k_size = large ? 1024 : 16 * std::uniform_int_distribution<int>(1, 80)(random);
    std::vector<int> group_counts;
    for (int g = 1; g <= k_size / 16; ++g)
      if (k_size % g == 0 && (k_size / g) % 16 == 0) group_counts.push_back(g);
    const int groups = group_counts[random() % group_counts.size()];
    const int columns = large ? 9000 : std::uniform_int_distribution<int>(1, trial < 4 ? 3 : 700)(random);
    const bool bf16 = trial % 2 == 0;
    INFO("columns " << columns << " k " << k_size << " groups " << groups << (bf16 ? " bfloat16" : " float32"));
    std::vector<int8_t> weight(static_cast<size_t>(columns) * k_size);
    for (int8_t& w : weight) w = static_cast<int8_t>(byte(random));
    std::vector<float> scales(static_cast<size_t>(columns) * groups);
    for (float& s : scales) s = std::exp(normal(random)) / 127.f;
    DeviceBuffer<int8_t> weight_device(weight);
    DeviceBuffer<float> scales_device(scales);
    const DeviceOutput out(weight.size(), bf16);
    REQUIRE(LaunchDequantizeInt8(weight_device.data, scales_device.data, columns, k_size, groups, out.data(), bf16,
                                 nullptr) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(out.CountNotRoundedOnce([&](size_t i) {
      const size_t column = i / k_size;
      return static_cast<float>(weight[i]) * scales[column * groups + (i % k_size) / (k_size / groups)];
    }) == 0);
  }
}

TEST_CASE("gpu: CUDA int8 dequantize refuses shapes outside its contract", "[gpu]") {
  REQUIRE(HaveGpu());
  DeviceBuffer<int8_t> weight_device(std::vector<int8_t>(64 * 64));
  DeviceBuffer<float> scales_device(std::vector<float>(64 * 4, 1.f));
  DeviceBuffer<float> out_device(std::vector<float>(64 * 64));
  const auto launch = [&](const int8_t* weight, int columns, int k_size, int groups, void* out) {
    return LaunchDequantizeInt8(weight, scales_device.data, columns, k_size, groups, out, false, nullptr);
  };
  REQUIRE(launch(weight_device.data, 64, 64, 4, out_device.data) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(launch(weight_device.data, 0, 64, 1, out_device.data) == cudaErrorInvalidValue);
  CHECK(launch(weight_device.data, 64, 40, 1, out_device.data) == cudaErrorInvalidValue);
  CHECK(launch(weight_device.data, 64, 64, 8, out_device.data) == cudaErrorInvalidValue);
  CHECK(launch(weight_device.data, 64, 64, 3, out_device.data) == cudaErrorInvalidValue);
  CHECK(launch(weight_device.data + 1, 63, 64, 1, out_device.data) == cudaErrorInvalidValue);
  CHECK(launch(weight_device.data, 63, 64, 1, out_device.data + 1) == cudaErrorInvalidValue);
}

}  // namespace
}  // namespace llmc::model::cuda
