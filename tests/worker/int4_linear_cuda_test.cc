// [gpu]: the CUDA W4A16 kernels (worker/model/int4_linear_cuda_kernels.h) against a float64 reference of the
// packed weights, on random shapes, group sizes of 32, 64 and 128, with and without zero points. Needs only the
// CUDA runtime, so it builds wherever nvcc is and runs on any machine with a GPU (ctest -L gpu).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cuda_device_buffer.h"
#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/int4_linear_cuda_kernels.h"

namespace llmc::model::cuda {
namespace {

using cpu::attention_detail::Bf16ToFloat;
using cpu::attention_detail::FloatToBf16;
using testing::DeviceBuffer;
using testing::DeviceOutput;
using testing::HaveGpu;

// Random packed weights in int4_weight.h's layout, with their scales (and zero points, whole numbers 0..16).
struct PackedWeights {
  PackedWeights(int columns, int k_size, int groups, bool zero_points, std::mt19937& random)
      : columns(columns), k_size(k_size), groups(groups), zero_points(zero_points) {
    std::normal_distribution<float> normal(0.f, 1.f);
    bytes.resize(static_cast<size_t>(columns) * k_size / 2);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(random() & 0xFF);
    scales.resize(static_cast<size_t>(columns) * groups * (zero_points ? 2 : 1));
    for (size_t i = 0; i < scales.size(); ++i) {
      const bool is_zero_point = zero_points && i % 2 == 1;
      scales[i] = is_zero_point ? static_cast<float>(random() % 17) : std::exp(normal(random)) / 7.f;
    }
  }

  int Nibble(int column, int k) const {
    const uint8_t byte = bytes[(static_cast<size_t>(column) * k_size + k) / 2];
    return k % 2 == 0 ? byte & 0xF : byte >> 4;
  }
  // The weight as the kernels compute it: (u - z) * scale in float.
  float Weight(int column, int k) const {
    const size_t group = static_cast<size_t>(column) * groups + k / (k_size / groups);
    const float scale = zero_points ? scales[2 * group] : scales[group];
    const float zero = zero_points ? scales[2 * group + 1] : 8.f;
    return (static_cast<float>(Nibble(column, k)) - zero) * scale;
  }

  int columns, k_size, groups;
  bool zero_points;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
};

struct Case {
  int rows, columns, k_size, group_size;
  bool zero_points, bf16, bias;
};

// The worst of |got - want| - bound over the outputs (<= 0 passes), want summed in float64 from the exact
// inputs. Bound: float sums of K products, each group's sum scaled once, and a bfloat16 result rounded once
// more (2^-9 of itself). A misplaced nibble or row errs by about a whole term, far past it.
double WorstExcess(const Case& c, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const PackedWeights w(c.columns, c.k_size, c.k_size / c.group_size, c.zero_points, random);
  std::vector<float> x(static_cast<size_t>(c.rows) * c.k_size);
  std::vector<uint16_t> x_bf16(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(random) * 3.f;
    x_bf16[i] = FloatToBf16(x[i]);
    if (c.bf16) x[i] = Bf16ToFloat(x_bf16[i]);
  }
  std::vector<float> bias(c.bias ? c.columns : 0);
  std::vector<uint16_t> bias_bf16(bias.size());
  for (size_t i = 0; i < bias.size(); ++i) {
    bias_bf16[i] = FloatToBf16(normal(random));
    bias[i] = c.bf16 ? Bf16ToFloat(bias_bf16[i]) : normal(random);
  }

  DeviceBuffer<uint8_t> weight_device(w.bytes);
  DeviceBuffer<float> scales_device(w.scales);
  DeviceBuffer<float> x_float(x);
  DeviceBuffer<uint16_t> x_half(x_bf16);
  DeviceBuffer<float> bias_float(bias);
  DeviceBuffer<uint16_t> bias_half(bias_bf16);
  const DeviceOutput out_device(static_cast<size_t>(c.rows) * c.columns, c.bf16);
  const void* bias_device = !c.bias ? nullptr : c.bf16 ? static_cast<const void*>(bias_half.data) : bias_float.data;
  const Int4LinearParams params{c.bf16 ? static_cast<const void*>(x_half.data) : x_float.data,
                                weight_device.data,
                                scales_device.data,
                                bias_device,
                                out_device.data(),
                                c.rows,
                                c.columns,
                                c.k_size,
                                c.k_size / c.group_size,
                                c.zero_points,
                                c.bf16};
  REQUIRE(LaunchInt4Linear(params, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> out = out_device.ToFloats();

  double worst = -INFINITY;
  for (int row = 0; row < c.rows; ++row) {
    for (int column = 0; column < c.columns; ++column) {
      double want = 0, magnitude = 0;
      for (int k = 0; k < c.k_size; ++k) {
        const double term = static_cast<double>(x[static_cast<size_t>(row) * c.k_size + k]) * w.Weight(column, k);
        want += term;
        magnitude += std::fabs(term);
      }
      if (c.bias) want += bias[column], magnitude += std::fabs(bias[column]);
      const double bound = magnitude * 1e-5 + (c.bf16 ? std::fabs(want) / 256 : 0) + 1e-6;
      const double got = out[static_cast<size_t>(row) * c.columns + column];
      worst = std::max(worst, std::isfinite(got) ? std::fabs(got - want) - bound : INFINITY);
    }
  }
  return worst;
}

TEST_CASE("gpu: CUDA int4 linear equals a float64 reference", "[gpu]") {
  REQUIRE(HaveGpu());
  std::mt19937 random(41);
  int trial = 0;
  for (const int group_size : {32, 64, 128}) {
    for (const bool zero_points : {false, true}) {
      for (int rows = 1; rows <= kInt4LinearMaxRows; ++rows) {
        // K from one group up to past a warp's 1024 inputs a step, not a multiple of them; odd column counts.
        const int k_size = group_size * std::uniform_int_distribution<int>(1, 4096 / group_size)(random);
        const int columns = std::uniform_int_distribution<int>(1, 300)(random);
        const Case c{rows, columns, k_size, group_size, zero_points, trial % 2 == 0, trial % 3 == 0};
        INFO("rows " << rows << " columns " << columns << " k " << k_size << " group " << group_size
                     << (zero_points ? " zero points" : " symmetric") << (c.bf16 ? " bfloat16" : " float32")
                     << (c.bias ? " bias" : ""));
        CHECK(WorstExcess(c, 100 + trial) <= 0);
        ++trial;
      }
    }
  }
}

// Every weight (u - z) * scale rounded once (float32, then to bfloat16 to nearest even), bit for bit; one matrix
// of more 32-input chunks than the grid has threads, so its threads loop.
TEST_CASE("gpu: CUDA int4 dequantize equals the packed weights rounded once", "[gpu]") {
  REQUIRE(HaveGpu());
  std::mt19937 random(43);
  for (int trial = 0; trial < 13; ++trial) {
    const bool large = trial == 12;  // 40000 x 1024: 1.28 M chunks, past 4096 blocks of 256
    const int group_size = 32 << (trial % 3);
    const int k_size = large ? 1024 : group_size * std::uniform_int_distribution<int>(1, 20)(random);
    const int columns = large ? 40000 : std::uniform_int_distribution<int>(1, 500)(random);
    const bool zero_points = trial % 2 == 1, bf16 = trial % 4 < 2;
    INFO("columns " << columns << " k " << k_size << " group " << group_size << (zero_points ? " zero points" : "")
                    << (bf16 ? " bfloat16" : " float32"));
    const PackedWeights w(columns, k_size, k_size / group_size, zero_points, random);
    DeviceBuffer<uint8_t> weight_device(w.bytes);
    DeviceBuffer<float> scales_device(w.scales);
    const DeviceOutput out(static_cast<size_t>(columns) * k_size, bf16);
    REQUIRE(LaunchDequantizeInt4(weight_device.data, scales_device.data, zero_points, columns, k_size,
                                 k_size / group_size, out.data(), bf16, nullptr) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(out.CountNotRoundedOnce(
              [&](size_t i) { return w.Weight(static_cast<int>(i / k_size), static_cast<int>(i % k_size)); }) == 0);
  }
}

TEST_CASE("gpu: CUDA int4 kernels refuse shapes outside their contract", "[gpu]") {
  REQUIRE(HaveGpu());
  DeviceBuffer<uint8_t> weight_device(std::vector<uint8_t>(64 * 32));
  DeviceBuffer<float> scales_device(std::vector<float>(64 * 2, 1.f));
  DeviceBuffer<uint16_t> x_device(std::vector<uint16_t>(64 * 64));
  DeviceBuffer<float> out_device(std::vector<float>(64 * 64));
  const Int4LinearParams good{
      x_device.data, weight_device.data, scales_device.data, nullptr, out_device.data, 1, 64, 64, 2, false, true};
  REQUIRE(LaunchInt4Linear(good, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (const auto& [name, mutate] : std::vector<std::pair<const char*, void (*)(Int4LinearParams&)>>{
           {"no rows", [](Int4LinearParams& p) { p.rows = 0; }},
           {"more rows than the kernel takes", [](Int4LinearParams& p) { p.rows = kInt4LinearMaxRows + 1; }},
           {"K not a multiple of 32", [](Int4LinearParams& p) { p.k_size = 48; }},
           {"groups of 16", [](Int4LinearParams& p) { p.groups = 4; }},
           {"groups not dividing K", [](Int4LinearParams& p) { p.groups = 3; }},
           {"weights off a 16-byte boundary", [](Int4LinearParams& p) { p.weight += 8; }},
           {"activations off a 16-byte boundary",
            [](Int4LinearParams& p) { p.x = static_cast<const char*>(p.x) + 2; }}}) {
    INFO(name);
    Int4LinearParams params = good;
    mutate(params);
    CHECK(LaunchInt4Linear(params, nullptr) == cudaErrorInvalidValue);
  }
  const auto dequantize = [&](const uint8_t* weight, int k_size, int groups, void* out) {
    return LaunchDequantizeInt4(weight, scales_device.data, false, 32, k_size, groups, out, false, nullptr);
  };
  CHECK(dequantize(weight_device.data, 64, 2, out_device.data) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(dequantize(weight_device.data, 48, 1, out_device.data) == cudaErrorInvalidValue);
  CHECK(dequantize(weight_device.data, 64, 4, out_device.data) == cudaErrorInvalidValue);
  CHECK(dequantize(weight_device.data + 8, 64, 2, out_device.data) == cudaErrorInvalidValue);
  CHECK(dequantize(weight_device.data, 64, 2, out_device.data + 1) == cudaErrorInvalidValue);
}

}  // namespace
}  // namespace llmc::model::cuda
