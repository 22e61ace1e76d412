// W8A8: int8 weights with activations quantized to int8 per row and group at run time. The byte staging,
// the vpdpbusd kernel against the int16 kernels on the same integers, and the fused operators under
// ScopedInt8Activations against a composite on activations rounded the same way, on every path this machine has.
// libtorch's headers define glog's CHECK; Catch's, included after, must win.
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/packed_weight.h"
// (keep this order)
#include <cstring>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

TEST_CASE("w8a8: activation rows quantize to 127 levels, with their bytes and group offsets", "[unit][int8]") {
  std::vector<float> x = {0.5f, -1.0f, 0.25f, 1e-3f, 3.0f, -3.0f, 0.0f, 1.5f};
  std::vector<int16_t> q(12, 7);
  std::vector<float> scales(2);
  QuantizeActivationRow(x.data(), 8, 12, 4, 2, 127, q.data(), scales.data());
  CHECK(scales[0] == Approx(1.0f / 127));
  CHECK(scales[1] == Approx(3.0f / 127));
  CHECK(q[1] == -127);
  CHECK(q[4] == 127);
  CHECK(q[5] == -127);
  for (int i = 0; i < 8; ++i) CHECK(std::abs(q[i] * scales[i / 4] - x[i]) <= scales[i / 4] * 0.5f + 1e-7f);
  std::vector<int8_t> bytes(12, 1);
  std::vector<int32_t> offsets(3, -1);
  NarrowActivationRow(q.data(), 12, 4, 3, /*int4_byte_order=*/false, bytes.data(), offsets.data());
  for (int i = 0; i < 12; ++i) CHECK(bytes[i] == q[i]);
  CHECK(offsets[0] == 128 * (q[0] + q[1] + q[2] + q[3]));
  CHECK(offsets[1] == 128 * (q[4] + q[5] + q[6] + q[7]));
  CHECK(offsets[2] == 0);  // the padding
}

TEST_CASE("w8a8: narrowed rows hold the same bytes and offsets on every path, in either byte order", "[unit][int8]") {
  testing::ForEachCpuKernelPath([] {
    for (const int64_t stride : {8, 32, 56, 64, 72, 128, 200, 904, 4864}) {
      for (const int64_t group_size : {32, 64, 128, 512}) {
        const int64_t groups = (stride + group_size - 1) / group_size;
        std::vector<int16_t> row(stride);
        for (int64_t i = 0; i < stride; ++i) row[i] = static_cast<int16_t>((i * 37 + stride) % 255 - 127);
        for (const bool int4_order : {false, true}) {
          INFO("stride " << stride << " group " << group_size << " int4 order " << int4_order);
          // One byte past the row, which must stay as it was.
          std::vector<int8_t> bytes(stride + 1, 99);
          std::vector<int32_t> offsets(groups, -1);
          NarrowActivationRow(row.data(), stride, group_size, groups, int4_order, bytes.data(), offsets.data());
          constexpr int kOctetInputs[8] = {0, 4, 1, 5, 2, 6, 3, 7};
          int mismatches = 0;
          for (int64_t i = 0; i < stride; ++i) {
            const int64_t source = int4_order ? i / 8 * 8 + kOctetInputs[i % 8] : i;
            mismatches += bytes[i] != row[source];
          }
          CHECK(mismatches == 0);
          CHECK(bytes[stride] == 99);
          for (int64_t g = 0; g < groups; ++g) {
            int32_t sum = 0;
            for (int64_t i = g * group_size; i < std::min(stride, (g + 1) * group_size); ++i) sum += row[i];
            CHECK(offsets[g] == 128 * sum);
          }
        }
      }
    }
  });
}

// One packed panel of random int8 weights and its scales, `rows` activation rows quantized to 127 levels in
// the groups the fused operators use (the weight's groups, or one per row), staged both as int16 and as bytes.
struct W8A8Case {
  at::Tensor packed, scales;
  std::vector<int16_t> a;
  std::vector<int8_t> a8;
  std::vector<float> a_scales;
  std::vector<int32_t> offsets;
  int64_t k_padded, stride, group_pairs, groups, weight_groups;

  // `step` > 0: rows of whole steps of that many inputs (AMX-INT8 tiles read 64 at a time).
  W8A8Case(int64_t rows, int64_t k, int64_t group_size, int64_t step = 0) {
    const auto [q, s] = QuantizeInt8(Random({64, k}, at::kFloat, 0.1), group_size);
    packed = PackWeight(q);
    scales = PackScales(s);
    weight_groups = s.size(1);
    k_padded = PackedDepth(packed);
    stride = step > 0 ? (k_padded + step - 1) / step * step : k_padded;
    group_pairs = ActivationGroupPairs(k, weight_groups, Int8Activations::kInt8);
    groups = (k_padded / 2 + group_pairs - 1) / group_pairs;
    const int64_t rows_padded = (rows + kRowAlign - 1) / kRowAlign * kRowAlign;
    a.assign(rows_padded * stride, 0);
    a8.assign(rows_padded * stride, 0);
    a_scales.assign(rows_padded * groups, 0);
    offsets.assign(rows_padded * groups, 0);
    const at::Tensor x = Random({rows, k}, at::kFloat);
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeActivationRow(x[r].data_ptr<float>(), k, stride, 2 * group_pairs, groups, 127, &a[r * stride],
                            &a_scales[r * groups]);
      NarrowActivationRow(&a[r * stride], stride, 2 * group_pairs, groups, /*int4_byte_order=*/false, &a8[r * stride],
                          &offsets[r * groups]);
    }
  }

  std::vector<float> Run(void (*kernel)(const Int8PanelArgs&), int64_t rows) const {
    std::vector<float> out(((rows + kRowAlign - 1) / kRowAlign * kRowAlign) * kPanelWidth, -1.0f);
    kernel({a.data(), a_scales.data(), stride, rows, k_padded, group_pairs, groups, packed.data_ptr<int8_t>(),
            scales.data_ptr<float>(), weight_groups, out.data(), kPanelWidth, a8.data(), offsets.data()});
    out.resize(rows * kPanelWidth);
    return out;
  }
};

TEST_CASE("w8a8: the vpdpbusd kernel sums exactly the integers the int16 kernels sum", "[unit][int8]") {
#ifdef LLMC_CPU_X86_KERNELS
  if (DetectedCpuIsa() < CpuIsa::kAvx512Vnni) {
    WARN("no AVX512-VNNI here: the W8A8 kernel is not exercised (the int16 paths run W8A8 activations)");
    return;
  }
  at::manual_seed(21);
  for (const int64_t group_size : {0, 32, 128, 512}) {
    for (const int64_t k : {64, 96, 200, 512, 896, 1024, 4864}) {
      if (group_size > 0 && k % group_size != 0) continue;
      for (const int64_t rows : {1, 2, 5, 6, 7, 16, 17, 33}) {
        INFO("group " << group_size << " k " << k << " rows " << rows);
        const W8A8Case c(rows, k, group_size);
        // Same int32 sums, same float epilogue: the same bits.
        const std::vector<float> bytes = c.Run(&PanelW8A8Avx512, rows);
        const std::vector<float> int16 = c.Run(&PanelInt8Avx512, rows);
        CHECK(std::memcmp(bytes.data(), int16.data(), bytes.size() * sizeof(float)) == 0);
        // The portable path adds the groups in another order: equal to float rounding.
        const std::vector<float> portable = c.Run(&PanelInt8Portable, rows);
        double largest = 1e-30, worst = 0;
        for (size_t i = 0; i < bytes.size(); ++i) {
          largest = std::max(largest, std::abs(double{portable[i]}));
          worst = std::max(worst, std::abs(double{bytes[i]} - portable[i]));
        }
        CHECK(worst / largest < 1e-6);
      }
    }
  }
#else
  WARN("not an x86 build: no W8A8 kernel");
#endif
}

TEST_CASE("w8a8: the AMX-INT8 tile kernel sums exactly the integers the vpdpbusd kernel sums", "[unit][int8]") {
#ifdef LLMC_CPU_X86_KERNELS
  if (!HasAmxInt8()) {
    WARN("no AMX-INT8 here (" << DescribeCpu() << "): the tile kernel is not exercised");
    return;
  }
  at::manual_seed(23);
  for (const int64_t group_size : {0, 64, 128, 512}) {
    // 96 and 200 end in half a tile step (k_padded 96 and 224), read as zeros.
    for (const int64_t k : {64, 96, 200, 512, 896, 1024, 4864}) {
      if (group_size > 0 && k % group_size != 0) continue;
      for (const int64_t rows : {1, 15, 16, 17, 33, 128}) {
        INFO("group " << group_size << " k " << k << " rows " << rows);
        const W8A8Case c(rows, k, group_size, /*step=*/64);
        const std::vector<float> tiles = c.Run(&PanelW8A8Amx, rows);
        const std::vector<float> vectors = c.Run(&PanelW8A8Avx512, rows);
        CHECK(std::memcmp(tiles.data(), vectors.data(), tiles.size() * sizeof(float)) == 0);
      }
    }
  }
#else
  WARN("not an x86 build: no AMX-INT8 kernel");
#endif
}

// x rounded as the kernels round it for W8A8: per row and group of `group` inputs, to 127 levels of the
// group's largest magnitude.
at::Tensor FakeQuantizeActivations(const at::Tensor& x, int64_t group) {
  const int64_t rows = x.size(0), k = x.size(1);
  const int64_t padded = (k + group - 1) / group * group;
  const at::Tensor grouped = at::constant_pad_nd(x.to(at::kFloat), {0, padded - k}).view({rows, padded / group, group});
  const at::Tensor scale = grouped.abs().amax(-1, /*keepdim=*/true) / 127.0f;
  const at::Tensor q = at::round(grouped * at::where(scale > 0, 1.0f / scale, at::zeros_like(scale)));
  return (q * scale).view({rows, padded}).narrow(1, 0, k);
}

TEST_CASE("w8a8: fused operators under int8 activations match the composite on rounded activations", "[unit][int8]") {
  at::manual_seed(22);
  const at::Tensor none = at::empty({0});
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t group_size : {0, 32, 128}) {
      const int64_t k = 384, n = 100;
      const auto [q, s] = QuantizeInt8(Random({n, k}, at::kFloat, 0.1), group_size);
      const at::Tensor dequantized = composite::Dequantize(q, s, at::kFloat);
      const at::Tensor packed = PackWeight(q), scales = PackScales(s);
      for (const int64_t m : {1, 7, 16, 33, 300}) {
        const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
        const at::Tensor rounded =
            FakeQuantizeActivations(input, 2 * ActivationGroupPairs(k, s.size(1), Int8Activations::kInt8));
        const at::Tensor expected = composite::LinearResidual(rounded, dequantized, none, residual.to(at::kFloat));
        const at::Tensor unrounded =
            composite::LinearResidual(input.to(at::kFloat), dequantized, none, residual.to(at::kFloat));
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " group " << group_size << " m " << m << " path " << CpuIsaName(ActiveCpuIsa()));
          const ScopedInt8Activations w8a8(Int8Activations::kInt8);
          const at::Tensor out = LinearResidual(input, packed, scales, residual);
          // AMX machines multiply batches of 16 rows or more on AMX-INT8 tiles (the same rounding), or where they
          // cannot (no AMX-INT8, groups of 32 inputs) by dequantized bfloat16 panels.
          const bool amx_int8_tiles = HasAmxInt8() && group_size != 32;
          const bool rounds_activations = !(ActiveCpuIsa() == CpuIsa::kAmx && m >= 16 && !amx_int8_tiles);
          const double error = RelativeError(out, rounds_activations ? expected : unrounded);
          CHECK(error < (dtype == at::kFloat ? 1e-5 : 2e-2));
          if (dtype == at::kFloat && rounds_activations) {
            // It did round the activations: the unrounded composite is much farther off.
            CHECK(RelativeError(out, unrounded) > 10 * error);
          }
        });
        // Outside the scope the same weights run W8A16 again.
        CHECK(ActiveInt8Activations() == Int8Activations::kInt16);
      }
    }
  }
}

TEST_CASE("w8a8: activation groups follow the weight's, or span the row up to the exact-sum bound", "[unit][int8]") {
  CHECK(ActivationGroupPairs(896, 7, Int8Activations::kInt8) == 64);  // groups of 128 inputs
  CHECK(ActivationGroupPairs(896, 7, Int8Activations::kInt16) == 64);
  CHECK(ActivationGroupPairs(896, 1, Int8Activations::kInt16) == 64);  // int16: 128 inputs
  CHECK(ActivationGroupPairs(896, 1, Int8Activations::kInt8) == 448);  // the whole row, 14 steps of 64
  CHECK(ActivationGroupPairs(200, 1, Int8Activations::kInt8) == 128);  // rounded up to whole steps
  CHECK(ActivationGroupPairs(200000, 1, Int8Activations::kInt8) == kMaxInt8ActivationGroup / 2);
}

TEST_CASE("w8a8: the largest products over a long row sum exactly", "[unit][int8]") {
  // Every weight and activation at its largest level: one group's int32 sum would pass 2^31 after 133,144
  // inputs. The row is longer than that, so only the bound on a group's length keeps the result right. One
  // row runs the int16 kernels on int8 activations, 16 rows the byte kernel (or the AMX-INT8 tiles).
  const int64_t k = 140000, n = 64;
  const auto [q, s] = QuantizeInt8(at::full({n, k}, 0.5f), 0);
  const at::Tensor packed = PackWeight(q), scales = PackScales(s);
  for (const int64_t m : {1, 16}) {
    const at::Tensor input = at::ones({m, k}), residual = at::zeros({m, n});
    testing::ForEachCpuKernelPath([&] {
      for (const auto activations : {Int8Activations::kInt8, Int8Activations::kInt16}) {
        INFO("m " << m << " path " << CpuIsaName(ActiveCpuIsa()) << " int8 activations "
                  << (activations == Int8Activations::kInt8));
        const ScopedInt8Activations scope(activations);
        const at::Tensor out = LinearResidual(input, packed, scales, residual);
        CHECK(RelativeError(out, at::full({m, n}, 0.5 * k)) < 1e-6);
      }
    });
  }
}

TEST_CASE("w8a8: by the batch, small batches run int16 activations and larger ones int8, bit for bit", "[unit][int8]") {
  at::manual_seed(23);
  const int64_t k = 256, n = 130;
  const auto [q, s] = QuantizeInt8(Random({n, k}, at::kFloat, 0.1), 0);
  const at::Tensor packed = PackWeight(q), scales = PackScales(s);
  const auto run = [&](Int8Activations activations, const at::Tensor& input, const at::Tensor& residual) {
    const ScopedInt8Activations scope(activations);
    return LinearResidual(input, packed, scales, residual);
  };
  for (const int64_t m :
       {int64_t{1}, int64_t{4}, kInt8ActivationMinRows - 1, kInt8ActivationMinRows, int64_t{16}, int64_t{33}}) {
    const at::Tensor input = Random({m, k}, at::kBFloat16), residual = Random({m, n}, at::kBFloat16);
    testing::ForEachCpuKernelPath([&] {
      INFO("m " << m << " path " << CpuIsaName(ActiveCpuIsa()));
      // Only the AVX512-VNNI and AMX kernels multiply int8 activations faster; elsewhere they would only
      // lose precision.
      const bool int8 = m >= kInt8ActivationMinRows && ActiveCpuIsa() >= CpuIsa::kAvx512Vnni;
      {
        const ScopedInt8Activations by_batch(Int8Activations::kByBatch);
        CHECK(Int8ActivationsForRows(m) == (int8 ? Int8Activations::kInt8 : Int8Activations::kInt16));
      }
      const at::Tensor out = run(Int8Activations::kByBatch, input, residual);
      const at::Tensor w8a16 = run(Int8Activations::kInt16, input, residual);
      const at::Tensor w8a8 = run(Int8Activations::kInt8, input, residual);
      CHECK(at::equal(out, int8 ? w8a8 : w8a16));
      // The two settings do differ on these rows, so the comparison above tells them apart.
      CHECK_FALSE(at::equal(w8a16, w8a8));
    });
  }
}

}  // namespace
}  // namespace llmc::model::cpu
