// int4 weights requantized to int8 for large batches on AMX-INT8 tiles or PanelW8A8Avx512 (int4_requantize.h): the
// portable values against the exact ones (the largest group of a column exact, every value within half a column
// step), which weights qualify, the tiles' operand and the AVX512 panel against the portable values, and
// linear_residual from Int4RequantizedMinRows() rows against the requantized matrix with one activation scale per row,
// symmetric and with zero points, on each path that requantizes.
#include "worker/model/cpu/int4_requantize.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/int4_requantized.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/panel_matmul.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

// One random packed panel's bytes, scales [groups][64] in [0.5, 1] times `spread` for group 0, and with
// `zero_points`, offsets 8 - z for z in 0..16.
struct RandomPanel {
  std::vector<uint8_t> bytes;
  std::vector<float> scales, zero_offsets;
};

RandomPanel MakePanel(int64_t k_padded, int64_t groups, bool zero_points, float spread) {
  RandomPanel panel;
  const at::Tensor bytes = at::randint(0, 256, {k_padded * kPanelWidth / 2}, at::kByte);
  panel.bytes.assign(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + bytes.numel());
  const at::Tensor scales = at::rand({groups, kPanelWidth}) * 0.5 + 0.5;
  scales[0].mul_(spread);
  panel.scales.assign(scales.data_ptr<float>(), scales.data_ptr<float>() + scales.numel());
  if (zero_points) {
    const at::Tensor offsets = 8 - at::randint(0, 17, {groups, kPanelWidth}).to(at::kFloat);
    panel.zero_offsets.assign(offsets.data_ptr<float>(), offsets.data_ptr<float>() + offsets.numel());
  }
  return panel;
}

// The signed nibble of input k, column c of a packed panel (int4_weight.h: a 32-bit word per octet and column).
int32_t Nibble(const std::vector<uint8_t>& bytes, int64_t k, int64_t c) {
  uint32_t word;
  std::memcpy(&word, bytes.data() + (k / 8 * kPanelWidth + c) * 4, sizeof(word));
  const uint32_t value = (word >> (4 * Int4NibblePosition(k % 8))) & 0xfu;
  return static_cast<int32_t>(value ^ 8u) - 8;
}

TEST_CASE("int4 requantize: the largest group of a column is exact, every value within half a column step",
          "[unit][int4][requantize]") {
  at::manual_seed(61);
  for (const bool zero_points : {false, true}) {
    for (const int64_t group_size : {32, 64, 128}) {
      const int64_t k_padded = 384, groups = k_padded / group_size, group_pairs = group_size / 2;
      const RandomPanel panel = MakePanel(k_padded, groups, zero_points, 0.4f);
      std::vector<float> factors(groups * kPanelWidth), column_scales(kPanelWidth);
      std::vector<int32_t> offsets(groups * kPanelWidth);
      std::vector<int8_t> values(k_padded * kPanelWidth);
      const float* zero_offsets = zero_points ? panel.zero_offsets.data() : nullptr;
      Int4RequantizeFactors(panel.scales.data(), zero_offsets, groups, factors.data(), offsets.data(),
                            column_scales.data());
      RequantizeInt4PanelPortable(panel.bytes.data(), factors.data(), offsets.data(), groups, group_pairs, k_padded,
                                  values.data());
      const double steps = zero_points ? kInt4RequantizeZeroPointSteps : kInt4RequantizeSymmetricSteps;
      int64_t exact_values = 0;
      for (int64_t c = 0; c < kPanelWidth; ++c) {
        double largest = 0;
        for (int64_t g = 0; g < groups; ++g) largest = std::max<double>(largest, panel.scales[g * kPanelWidth + c]);
        CHECK(column_scales[c] == static_cast<float>(largest / steps));
        for (int64_t k = 0; k < k_padded; ++k) {
          const int64_t at = k / group_size * kPanelWidth + c;
          const int32_t unscaled =
              Nibble(panel.bytes, k, c) + (zero_points ? static_cast<int32_t>(zero_offsets[at]) : 0);
          const double exact = unscaled * static_cast<double>(panel.scales[at]);
          const double requantized = values[k * kPanelWidth + c] * static_cast<double>(column_scales[c]);
          INFO("zero points " << zero_points << " group " << group_size << " column " << c << " k " << k);
          REQUIRE(std::abs(values[k * kPanelWidth + c]) <= (zero_points ? 112 : 120));
          CHECK(std::abs(requantized - exact) <= column_scales[c] * (0.5 + 1e-5));
          if (panel.scales[at] == static_cast<float>(largest)) {
            CHECK(values[k * kPanelWidth + c] == unscaled * static_cast<int32_t>(steps));
            ++exact_values;
          }
        }
      }
      CHECK(exact_values >= kPanelWidth * group_size);  // every column's largest group
    }
  }
}

TEST_CASE("int4 requantize: a weight qualifies only when every group keeps two int8 steps per int4 step",
          "[unit][int4][requantize]") {
  // Each verdict on weights of their own (copies): the verdict is remembered per weight.
  const auto verdict = [](const at::Tensor& scales, const at::Tensor& zero_offsets) {
    const at::Tensor packed = at::zeros({scales.size(0), 16, kPanelWidth, 4}, at::kByte);
    return Int4RequantizesToInt8(
        PanelWeight(packed, zero_offsets.defined() ? at::stack({scales, zero_offsets}) : scales.clone()));
  };
  const at::Tensor none;
  const at::Tensor even = at::full({2, 4, kPanelWidth}, 0.01f);
  CHECK(verdict(even, none));
  CHECK(verdict(even, at::full({2, 4, kPanelWidth}, 3.0f)));
  // Symmetric: t = 15 s / s_max >= 2 down to s = s_max * 2 / 15; with zero points 7 s / s_max, s_max * 2 / 7.
  at::Tensor quiet = even.clone();
  quiet[1][2][5] = 0.01f * 2.0f / 15.0f * 1.01f;
  CHECK(verdict(quiet, none));
  CHECK_FALSE(verdict(quiet, at::zeros({2, 4, kPanelWidth})));
  quiet[1][2][5] = 0.01f * 2.0f / 15.0f * 0.99f;
  CHECK_FALSE(verdict(quiet, none));
  // A group of zeros is exact, whatever its column's largest.
  at::Tensor silent = even.clone();
  silent[0][3][7] = 0.0f;
  CHECK(verdict(silent, none));
  at::Tensor broken = even.clone();
  broken[1][0][0] = std::nanf("");
  CHECK_FALSE(verdict(broken, none));
  broken[1][0][0] = -0.01f;
  CHECK_FALSE(verdict(broken, none));
  // Weights do not change once loaded: the same weight keeps its first verdict.
  const at::Tensor packed = at::zeros({2, 16, kPanelWidth, 4}, at::kByte);
  at::Tensor kept = even.clone();
  CHECK(Int4RequantizesToInt8(PanelWeight(packed, kept)));
  kept[0][0][0] = 1e-6f;
  CHECK(Int4RequantizesToInt8(PanelWeight(packed, kept)));
  CHECK_FALSE(Int4RequantizesToInt8(PanelWeight(packed, kept.clone())));
}

TEST_CASE("int4 requantize: large batches requantize on the tiles and on the avx512_vnni path with VBMI, nowhere else",
          "[unit][int4][requantize]") {
  struct Reset {
    ~Reset() { ResetCpuIsa(); }
  } reset;
#ifdef LLMC_CPU_X86_KERNELS
  const bool vbmi = __builtin_cpu_supports("avx512vbmi");
#else
  const bool vbmi = false;
#endif
  for (int isa = 0; isa <= static_cast<int>(DetectedCpuIsa()); ++isa) {
    const CpuIsa path = static_cast<CpuIsa>(isa);
    REQUIRE(ForceCpuIsa(path).ok());
    INFO("kernel path " << CpuIsaName(path));
    const bool expected = path == CpuIsa::kAmx ? HasAmxInt8() : path == CpuIsa::kAvx512Vnni && vbmi;
    CHECK(RequantizesLargeInt4Batches() == expected);
    if (expected) {
      CHECK(Int4RequantizedMinRows() ==
            (path == CpuIsa::kAmx ? kInt4RequantizedMinRowsOnTiles : kInt4RequantizedMinRowsAvx512));
    }
  }
}

#ifdef LLMC_CPU_X86_KERNELS
TEST_CASE("int4 requantize: the tiles' operand and the AVX512 panel hold the portable values, zeros past the depth",
          "[unit][int4][requantize]") {
  const bool amx_int8 = HasAmxInt8();
  const bool avx512_vbmi = DetectedCpuIsa() >= CpuIsa::kAvx512Vnni && __builtin_cpu_supports("avx512vbmi");
  if (!amx_int8) WARN("no AMX-INT8 here (" << DescribeCpu() << "): the requantized tile operand is not built");
  if (!avx512_vbmi) WARN("no AVX512-VBMI here: the requantized AVX512 panel is not built");
  at::manual_seed(62);
  for (const bool zero_points : {false, true}) {
    for (const int64_t group_size : {32, 64, 128}) {
      // 96 and 160: a partial tile step of padding; 128: one group for 128 inputs; 4864: Qwen2-0.5B's down
      // projection.
      for (const int64_t k_padded : {96, 128, 160, 384, 4864}) {
        if (k_padded % group_size != 0) continue;
        const int64_t groups = k_padded / group_size;
        const RandomPanel panel = MakePanel(k_padded, groups, zero_points, 0.3f);
        std::vector<float> factors(groups * kPanelWidth), column_scales(kPanelWidth);
        std::vector<int32_t> offsets(groups * kPanelWidth);
        std::vector<int8_t> expected(k_padded * kPanelWidth);
        Int4RequantizeFactors(panel.scales.data(), zero_points ? panel.zero_offsets.data() : nullptr, groups,
                              factors.data(), offsets.data(), column_scales.data());
        RequantizeInt4PanelPortable(panel.bytes.data(), factors.data(), offsets.data(), groups, group_size / 2,
                                    k_padded, expected.data());
        INFO("zero points " << zero_points << " group " << group_size << " k " << k_padded);
        if (amx_int8) {
          const int8_t* tiles = RequantizedInt4TilePanel(panel.bytes.data(), factors.data(), offsets.data(), groups,
                                                         group_size / 2, k_padded);
          const int64_t padded_inputs = (k_padded + kAmxInt8StepInputs - 1) / kAmxInt8StepInputs * kAmxInt8StepInputs;
          int64_t mismatches = 0;
          for (int64_t k = 0; k < padded_inputs; ++k) {
            for (int64_t c = 0; c < kPanelWidth; ++c) {
              // The tiles' layout: [k / 4][kPanelWidth][4].
              const int8_t tile_value = tiles[(k / 4 * kPanelWidth + c) * 4 + k % 4];
              mismatches += tile_value != (k < k_padded ? expected[k * kPanelWidth + c] : 0);
            }
          }
          CHECK(mismatches == 0);
        }
        if (avx512_vbmi) {
          std::vector<int8_t> pairs(k_padded * kPanelWidth, int8_t{99});
          RequantizeInt4PanelPairsAvx512(panel.bytes.data(), factors.data(), offsets.data(), groups, group_size / 2,
                                         k_padded, pairs.data());
          int64_t mismatches = 0;
          for (int64_t k = 0; k < k_padded; ++k) {
            for (int64_t c = 0; c < kPanelWidth; ++c) {
              // The W8A8 kernels' layout: [k / 2][kPanelWidth][2].
              mismatches += pairs[(k / 2 * kPanelWidth + c) * 2 + k % 2] != expected[k * kPanelWidth + c];
            }
          }
          CHECK(mismatches == 0);
        }
      }
    }
  }
}

#endif  // LLMC_CPU_X86_KERNELS

// A weight whose first group of inputs is 100 times quieter than the rest: too fine to requantize.
at::Tensor WithQuietGroup(at::Tensor weight, int64_t group_size) {
  weight.narrow(1, 0, group_size).mul_(0.01);
  return weight;
}

TEST_CASE("int4 requantize: large batches multiply the requantized weight, smaller ones sum per group",
          "[unit][int4][requantize]") {
  // Each path that requantizes: the tiles, and PanelW8A8Avx512 on the avx512_vnni path (forced on an AMX machine).
  std::vector<CpuIsa> paths;
  struct Reset {
    ~Reset() { ResetCpuIsa(); }
  } reset;
  for (const CpuIsa isa : {CpuIsa::kAmx, CpuIsa::kAvx512Vnni}) {
    if (ForceCpuIsa(isa).ok() && RequantizesLargeInt4Batches()) paths.push_back(isa);
  }
  ResetCpuIsa();
  if (paths.empty()) {
    WARN("neither AMX-INT8 nor AVX512-VBMI on the avx512_vnni path here (" << DescribeCpu()
                                                                           << "): int4 batches are not requantized");
    return;
  }
  at::manual_seed(63);
  const ScopedInt8Activations w4a8(Int8Activations::kInt8);
  const at::Tensor none = at::empty({0});
  struct Shape {
    int64_t k, group_size;
    bool zero_points, quiet;
  };
  std::vector<Shape> shapes;
  for (const bool zero_points : {false, true}) {
    for (const bool quiet : {false, true}) {
      shapes.push_back({384, 32, zero_points, quiet});
      shapes.push_back({384, 128, zero_points, quiet});
    }
    shapes.push_back({128, 128, zero_points, false});  // one group: exact
  }
  // Past kMaxInt8ActivationGroup inputs the rows take a scale per 32,768.
  shapes.push_back({32896, 128, false, false});
  for (const Shape& shape : shapes) {
    const int64_t n = 136, k = shape.k, group_size = shape.group_size;
    const bool zero_points = shape.zero_points, quiet = shape.quiet;
    at::Tensor weight = Random({n, k}, at::kFloat, 0.1);
    if (quiet) weight = WithQuietGroup(weight, group_size);
    at::Tensor packed, scales, dequantized;
    if (zero_points) {
      // Asymmetric groups: each group's scale and zero point from its range.
      const at::Tensor grouped = weight.reshape({n, k / group_size, group_size});
      const at::Tensor low = grouped.amin(-1), high = grouped.amax(-1);
      const at::Tensor scale = (high - low) / 15;
      at::Tensor zero = at::round(-low / scale).clamp(0, 15);
      zero[0].fill_(16);  // GPTQ's older checkpoints' largest: values u - 16, down to -16
      const at::Tensor u = at::round(grouped / scale.unsqueeze(-1) + zero.unsqueeze(-1)).clamp(0, 15);
      dequantized = ((u - zero.unsqueeze(-1)) * scale.unsqueeze(-1)).reshape({n, k});
      const at::Tensor nibbles = u.reshape({n, k}).to(at::kInt);
      using at::indexing::Slice;
      const at::Tensor bytes = (nibbles.index({Slice(), Slice(0, c10::nullopt, 2)}) +
                                16 * nibbles.index({Slice(), Slice(1, c10::nullopt, 2)}))
                                   .to(at::kByte);
      packed = PackInt4Weight(bytes);
      scales = PackInt4Scales(at::stack({scale, zero}, 2));
    } else {
      const auto [q, symmetric_scales] = QuantizeInt4(weight, group_size);
      dequantized = composite::Dequantize(q, symmetric_scales, at::kFloat);
      packed = PackInt4Weight(q);
      scales = PackScales(symmetric_scales);
    }
    CHECK(Int4RequantizesToInt8(PanelWeight(packed, scales)) == !quiet);
    const at::Tensor requantized = testing::RequantizedInt4Matrix(packed, scales, n, k);
    // The requantized weight stays near the exact one: within half a column step of each value.
    CHECK(RelativeError(requantized, dequantized) < (quiet ? 1.0 : 0.03));
    const std::vector<int64_t> rows =
        k > kMaxInt8ActivationGroup
            ? std::vector<int64_t>{kInt4RequantizedMinRowsOnTiles}
            : std::vector<int64_t>{kInt4RequantizedMinRowsAvx512 - 1, kInt4RequantizedMinRowsAvx512,
                                   kInt4RequantizedMinRowsOnTiles - 1, kInt4RequantizedMinRowsOnTiles, 300};
    for (const int64_t m : rows) {
      const at::Tensor input = Random({m, k}, at::kFloat), residual = Random({m, n}, at::kFloat);
      for (const CpuIsa isa : paths) {
        REQUIRE(ForceCpuIsa(isa).ok());
        INFO("zero points " << zero_points << " group " << group_size << " quiet " << quiet << " k " << k << " m " << m
                            << " path " << CpuIsaName(isa));
        const at::Tensor out = LinearResidual(input, packed, scales, residual);
        const at::Tensor exact = composite::LinearResidual(input, dequantized, none, residual);
        CHECK(RelativeError(out, exact) < 3e-2);
        const bool requantizes = !quiet && m >= Int4RequantizedMinRows();
        const at::Tensor as_int8 =
            composite::LinearResidual(testing::RowWideByteQuantized(input), requantized, none, residual);
        // The same products, summed in another order: O(1e-6) apart when requantized, O(1e-3) when not (unless one
        // group spans the row: then both paths quantize the rows alike and the requantized values are exact).
        if (requantizes) {
          CHECK(RelativeError(out, as_int8) < 1e-4);
        } else if (k > group_size) {
          CHECK(RelativeError(out, as_int8) > 1e-4);
        }
      }
    }
  }
}

}  // namespace
}  // namespace llmc::model::cpu
