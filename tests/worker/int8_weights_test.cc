// int8 weights (W8A16): the quantizer's bounds, and every fused operator on packed int8 weights against its
// composite on the dequantized weights, on every instruction-set path this machine has, forced one by one.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/packed_weight.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

// The kernels quantize activations to int16 per group, so beside the weights' own rounding (which the
// dequantized reference shares) the error is that of 15-bit inputs, below bfloat16's 8 bits.
double Int8Tolerance(at::ScalarType dtype) { return dtype == at::kFloat ? 1e-3 : 3e-2; }

const std::vector<int64_t> kInt8Rows = {1, 2, 5, 6, 7, 16, 17, 33};

TEST_CASE("int8 weights: quantize round trip within half a step, zero rows, group sizes", "[unit][int8]") {
  at::manual_seed(11);
  for (const int64_t group_size : {0, 32, 128, 256}) {
    INFO("group size " << group_size);
    at::Tensor weight = Random({70, 256}, at::kBFloat16, 0.05);
    weight[3].zero_();
    const auto [q, scales] = QuantizeInt8(weight, group_size);
    CHECK(q.scalar_type() == at::kChar);
    CHECK(scales.sizes() == at::IntArrayRef({70, group_size == 0 ? 1 : 256 / group_size}));
    CHECK(q.abs().max().item<int>() <= 127);
    CHECK(q.abs().max().item<int>() == 127);  // every row's largest reaches the end of the range
    CHECK(q[3].abs().sum().item<int>() == 0);
    CHECK(scales[3].eq(1.0).all().item<bool>());
    const at::Tensor dequantized = composite::Dequantize(q, scales, at::kFloat);
    const int64_t group = 256 / scales.size(1);
    const at::Tensor step = scales.repeat_interleave(group, 1);
    CHECK(((dequantized - weight.to(at::kFloat)).abs() <= step * 0.5001).all().item<bool>());
  }
  CHECK_THROWS(QuantizeInt8(at::randn({4, 96}), 64));  // 64 does not divide 96
  CHECK_THROWS(QuantizeInt8(at::randn({4, 96}), 48));  // not a supported size
  CHECK_FALSE(IsSupportedInt8GroupSize(100));
}

// tools/llmc_export/quantize.py's formula in ATen, which QuantizeInt8 must give bit for bit.
std::pair<at::Tensor, at::Tensor> ExporterInt8Quantize(const at::Tensor& weight, int64_t group_size) {
  const int64_t n = weight.size(0), k = weight.size(1), groups = group_size == 0 ? 1 : k / group_size;
  const at::Tensor grouped = weight.to(at::kFloat).reshape({n, groups, k / groups});
  const at::Tensor amax = grouped.abs().amax(-1);
  const at::Tensor scale = at::where(amax == 0, at::ones_like(amax), amax / 127);
  return {at::round(grouped / scale.unsqueeze(-1)).clamp(-127, 127).to(at::kChar).reshape({n, k}), scale};
}

TEST_CASE("int8 weights: quantize gives the exporter's values bit for bit, halves rounded to even", "[unit][int8]") {
  at::manual_seed(12);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const int64_t group_size : {0, 32, 128}) {
      INFO("dtype " << dtype << ", group size " << group_size);
      at::Tensor weight = Random({300, 256}, dtype, 0.05);
      weight[7].zero_();
      // Row 9: largest magnitude 127, so the scale is 1 and these land exactly halfway between two steps.
      weight[9].fill_(0.5);
      weight[9].narrow(0, 0, 4).copy_(at::tensor({127.f, 2.5f, -3.5f, -0.5f}).to(dtype));
      if (group_size > 0) {
        for (int64_t g = 1; g < 256 / group_size; ++g) weight[9][g * group_size] = 127.f;
      }
      const auto [q, scales] = QuantizeInt8(weight, group_size);
      const auto [want_q, want_scales] = ExporterInt8Quantize(weight, group_size);
      CHECK(at::equal(q, want_q));
      CHECK(at::equal(scales, want_scales));
      CHECK(at::equal(q[9].narrow(0, 0, 5), at::tensor({127, 2, -4, 0, 0}, at::kChar)));
    }
  }
  // A strided view is quantized as its values, not its storage.
  const at::Tensor wide = Random({64, 512}, at::kFloat, 0.1);
  const at::Tensor view = wide.narrow(1, 128, 256);
  CHECK(at::equal(QuantizeInt8(view, 128).first, ExporterInt8Quantize(view.contiguous(), 128).first));
}

struct Int8Weight {
  at::Tensor dequantized;  // float32 [N, K], the reference's matrix
  at::Tensor packed, scales;
};

Int8Weight MakeInt8(int64_t n, int64_t k, int64_t group_size, const std::vector<int64_t>& order = {}) {
  const auto [q, scales] = QuantizeInt8(Random({n, k}, at::kFloat, 0.1), group_size);
  return {composite::Dequantize(q, scales, at::kFloat), PackWeight(q, order), PackScales(scales, order)};
}

TEST_CASE("int8 weights: linear_residual, gate/up and the LM head match the dequantized compositions", "[unit][int8]") {
  at::manual_seed(12);
  const at::Tensor none = at::empty({0});
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t group_size : {0, 32, 64, 256, 512}) {
      for (const int64_t k : {64, 192, 320, 512, 1024}) {
        if (group_size > 0 && k % group_size != 0) continue;
        const int64_t n = 70;
        const Int8Weight weight = MakeInt8(n, k, group_size);
        for (const int64_t m : kInt8Rows) {
          const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
          const at::Tensor expected =
              composite::LinearResidual(input.to(at::kFloat), weight.dequantized, none, residual.to(at::kFloat));
          testing::ForEachCpuKernelPath([&] {
            INFO("dtype " << dtype << " group " << group_size << " m " << m << " k " << k);
            const at::Tensor out = LinearResidual(input, weight.packed, weight.scales, residual);
            CHECK(out.scalar_type() == dtype);
            CHECK(RelativeError(out, expected) < Int8Tolerance(dtype));
          });
        }
      }
    }
    // Odd input widths (padded to the kernels' depth) with one scale per row.
    const int64_t k = 72, intermediate = 40;
    const at::Tensor norm = Random({k}, dtype);
    const Int8Weight gate_up = MakeInt8(2 * intermediate, k, 0, GateUpColumnOrder(intermediate));
    const int64_t vocab = 130;
    const Int8Weight head = MakeInt8(vocab, k, 0);
    for (const int64_t m : kInt8Rows) {
      const at::Tensor hidden = Random({m, k}, dtype);
      const at::Tensor expected_act = composite::RmsNormGateUpSilu(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6,
                                                                   gate_up.dequantized, none, intermediate);
      const at::Tensor expected_logits =
          composite::RmsNormLmHead(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6, head.dequantized, none, vocab);
      testing::ForEachCpuKernelPath([&] {
        INFO("dtype " << dtype << " m " << m);
        CHECK(RelativeError(RmsNormGateUpSilu(hidden, norm, 1e-6, gate_up.packed, gate_up.scales, intermediate),
                            expected_act) < Int8Tolerance(dtype));
        const at::Tensor logits = RmsNormLmHead(hidden, norm, 1e-6, head.packed, head.scales, vocab);
        CHECK(RelativeError(logits, expected_logits) < Int8Tolerance(dtype));
        const auto [full, top_values, top_ids] =
            RmsNormLmHeadTopK(hidden, norm, 1e-6, head.packed, head.scales, vocab, at::empty({0}, at::kLong), 4);
        const auto [values, ids] = at::sort(logits, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
        CHECK(top_ids.equal(ids.narrow(1, 0, 4)));
        CHECK(top_values.equal(values.narrow(1, 0, 4)));
      });
    }
    // The tied embedding reads the packed int8 head back dequantized, as the composite does.
    const at::Tensor ids = at::tensor(std::vector<int64_t>{0, 129, 64, 63, 7}, at::kLong);
    const at::Tensor rows = Embed(ids, head.packed, head.scales, k);
    CHECK(rows.scalar_type() == at::kFloat);
    CHECK(rows.equal(head.dequantized.index_select(0, ids)));
  }
}

TEST_CASE("int8 weights: rms_norm_qkv_rope with bias writes the cache like the dequantized composition",
          "[unit][int8]") {
  at::manual_seed(13);
  const at::Tensor none = at::empty({0});
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t heads = 4, kv_heads = 2, head_dim = 32, k = 128, blocks = 8, block_size = 16;
    const int64_t width = (heads + 2 * kv_heads) * head_dim;
    const Int8Weight weight = MakeInt8(width, k, 32);
    const at::Tensor bias = Random({width}, dtype, 0.1), norm = Random({k}, dtype);
    for (const int64_t m : {1, 6, 17}) {
      const at::Tensor hidden = Random({m, k}, dtype);
      const at::Tensor positions = at::randint(0, 5000, {m}, at::kLong);
      const at::Tensor inv_freq = at::pow(10000.0, -at::arange(0, head_dim, 2, at::kFloat) / 32.0);
      const at::Tensor freqs = positions.to(at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);
      const at::Tensor cos = freqs.cos(), sin = freqs.sin();
      const at::Tensor slots = at::randperm(blocks * block_size, at::kLong).narrow(0, 0, m);
      const auto make_cache = [&] { return at::zeros({blocks, block_size, kv_heads, head_dim}, dtype); };
      at::Tensor expected_keys = make_cache().to(at::kFloat), expected_values = make_cache().to(at::kFloat);
      const at::Tensor expected_q = composite::RmsNormQkvRope(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6,
                                                              weight.dequantized, none, bias.to(at::kFloat), cos, sin,
                                                              expected_keys, expected_values, slots, heads, kv_heads);
      testing::ForEachCpuKernelPath([&] {
        INFO("dtype " << dtype << " m " << m);
        at::Tensor keys = make_cache(), values = make_cache();
        const at::Tensor q = RmsNormQkvRope(hidden, norm, 1e-6, weight.packed, weight.scales, bias, cos, sin, keys,
                                            values, slots, heads, kv_heads);
        CHECK(RelativeError(q, expected_q) < Int8Tolerance(dtype));
        CHECK(RelativeError(keys, expected_keys) < Int8Tolerance(dtype));
        CHECK(RelativeError(values, expected_values) < Int8Tolerance(dtype));
      });
    }
  }
}

TEST_CASE("int8 weights: prefill-sized batches multiply dequantized panels, per row and in groups", "[unit][int8]") {
  // From 256 rows (64 with AMX) each int8 panel is dequantized to the activations' type and multiplied by
  // the plain kernels.
  at::manual_seed(15);
  const at::Tensor none = at::empty({0});
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t group_size : {0, 32}) {
      const int64_t k = 96, n = 130;
      const Int8Weight weight = MakeInt8(n, k, group_size);
      for (const int64_t m : {255, 300}) {
        const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
        const at::Tensor expected =
            composite::LinearResidual(input.to(at::kFloat), weight.dequantized, none, residual.to(at::kFloat));
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " group " << group_size << " m " << m);
          CHECK(RelativeError(LinearResidual(input, weight.packed, weight.scales, residual), expected) <
                Int8Tolerance(dtype));
        });
      }
    }
  }
}

TEST_CASE("int8 weights: every path sums the same integers", "[unit][int8]") {
  // The paths differ only in the order of float additions across groups; within a group the int32 sums
  // are exact, so float32 outputs agree to rounding.
  at::manual_seed(14);
  const Int8Weight weight = MakeInt8(64, 512, 0);
  const at::Tensor input = Random({9, 512}, at::kFloat), residual = at::zeros({9, 64});
  std::vector<at::Tensor> outputs;
  testing::ForEachCpuKernelPath(
      [&] { outputs.push_back(LinearResidual(input, weight.packed, weight.scales, residual)); });
  for (const at::Tensor& out : outputs) CHECK(RelativeError(out, outputs.front()) < 1e-6);
}

TEST_CASE("int8 weights: weights at -128, as int8 checkpoints have them, sum exactly on every path", "[unit][int8]") {
  // Symmetric int8 from llm-compressor spans [-128, 127]. The widest sums: groups of 512 inputs (256 pairs)
  // of int16 activations at 32767, 512 x 32767 x 128 = 2,147,418,112, just inside int32. Columns hold -128,
  // or -128 and 127 in turn, so a sign or overflow error shows in either.
  const int64_t k = 1024, n = 64;
  at::Tensor q = at::full({n, k}, -128, at::kChar);
  q.slice(0, n / 2).slice(1, 1, k, 2).fill_(127);
  const at::Tensor packed = PackWeight(q), scales = PackScales(at::ones({n, k / 512}));
  at::Tensor expected = at::full({n}, -128.0 * k);
  expected.slice(0, n / 2).fill_(-0.5 * k);
  // 1 row: decode kernels; 16: the byte kernel (or AMX tiles); 300: prefill-sized, dequantized panels.
  for (const int64_t m : {1, 16, 300}) {
    const at::Tensor input = at::ones({m, k}), residual = at::zeros({m, n});
    testing::ForEachCpuKernelPath([&] {
      for (const auto activations : {Int8Activations::kInt16, Int8Activations::kInt8}) {
        INFO("m " << m << " path " << CpuIsaName(ActiveCpuIsa()) << " int8 activations "
                  << (activations == Int8Activations::kInt8));
        const ScopedInt8Activations scope(activations);
        const at::Tensor out = LinearResidual(input, packed, scales, residual);
        CHECK(RelativeError(out, expected.unsqueeze(0).expand({m, n})) < 1e-6);
      }
    });
  }
}

TEST_CASE("int8 weights: activation rows quantize to int16 within half a step, Inf and NaN are marked",
          "[unit][int8]") {
  std::vector<float> x = {0.5f, -1.0f, 0.25f, 1e-3f, 3.0f, -3.0f, 0.0f, 1.5f};
  std::vector<int16_t> q(10, 7);
  std::vector<float> scales(2);
  QuantizeActivationRow(x.data(), 8, 10, 4, 2, 32767, q.data(), scales.data());
  CHECK(scales[0] == Approx(1.0f / 32767));
  CHECK(q[1] == -32767);
  CHECK(q[4] == 32767);
  for (int i = 0; i < 8; ++i) CHECK(std::abs(q[i] * scales[i / 4] - x[i]) <= scales[i / 4] * 0.5f + 1e-9f);
  CHECK(q[8] == 0);
  CHECK(q[9] == 0);
  x[5] = std::numeric_limits<float>::infinity();
  QuantizeActivationRow(x.data(), 8, 10, 4, 2, 32767, q.data(), scales.data());
  CHECK(std::isnan(scales[1]));
  CHECK(q[5] == 0);
  CHECK(scales[0] == Approx(1.0f / 32767));  // the other group is untouched
  x[5] = -3.0f;
  x[1] = -std::numeric_limits<float>::quiet_NaN();  // a NaN alone, with its sign bit set
  QuantizeActivationRow(x.data(), 8, 10, 4, 2, 32767, q.data(), scales.data());
  CHECK(std::isnan(scales[0]));
  CHECK(q[0] == 0);
  CHECK(q[3] == 0);
  CHECK(scales[1] == Approx(3.0f / 32767));
  CHECK(q[4] == 32767);
  CHECK(q[5] == -32767);
  x[1] = -1.0f;
  x[6] = -std::numeric_limits<float>::infinity();  // -Inf alone, in the other group
  QuantizeActivationRow(x.data(), 8, 10, 4, 2, 32767, q.data(), scales.data());
  CHECK(scales[0] == Approx(1.0f / 32767));
  CHECK(q[1] == -32767);
  CHECK(std::isnan(scales[1]));
  CHECK(q[4] == 0);
  CHECK(q[7] == 0);
  const std::vector<float> zeros(8, 0.0f);
  QuantizeActivationRow(zeros.data(), 8, 10, 4, 2, 32767, q.data(), scales.data());
  CHECK(scales[0] == 0.0f);
  CHECK(scales[1] == 0.0f);
  CHECK(q[1] == 0);
}

TEST_CASE("int8 weights: every kernel path quantizes activation rows to the same values, from float32 and bfloat16",
          "[unit][int8]") {
  if (DetectedCpuIsa() < CpuIsa::kAvx512Vnni) WARN("no AVX512 here: only the portable quantizer is compared");
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Shape {
    int64_t k, stride, group_size;
  };
  // Whole and partial vectors and groups, groups past k, a stride beyond k.
  for (const Shape shape : {Shape{896, 896, 128}, Shape{4864, 4864, 128}, Shape{37, 64, 16}, Shape{130, 160, 64},
                            Shape{7, 32, 32}, Shape{300, 320, 256}}) {
    const int64_t groups = (shape.stride + shape.group_size - 1) / shape.group_size;
    for (int trial = 0; trial < 7; ++trial) {
      CAPTURE(shape.k, shape.group_size, trial);
      std::vector<c10::BFloat16> values(shape.k);
      std::vector<float> floats(shape.k);  // full float32 mantissas, not the bfloat16 values
      for (int64_t i = 0; i < shape.k; ++i) {
        // Magnitudes over many octaves, exact ties of the rounding, subnormals, zeros, Inf and NaN.
        float v = normal(random) * std::ldexp(1.0f, static_cast<int>(random() % 40) - 20);
        if (trial == 1 && i % 3 == 0) v = 0.0f;
        if (trial == 2 && i % 11 == 0) v = std::ldexp(1.0f, -130) * static_cast<float>(i % 5);  // subnormal
        if (trial == 3 && i == shape.k / 2) v = std::numeric_limits<float>::infinity();
        if (trial == 4 && i == shape.k - 1) v = -std::numeric_limits<float>::quiet_NaN();
        if (trial == 5) v = static_cast<float>(static_cast<int>(i % 9) - 4) * 0.5f;
        // Whole groups of subnormals: a scale below the smallest normal float, which quantizes to zeros.
        if (trial == 6 && (i / shape.group_size) % 2 == 0) v = std::ldexp(normal(random), -135);
        values[i] = c10::BFloat16(v);
        floats[i] = v;
      }
      for (const int16_t levels : {int16_t{32767}, int16_t{127}}) {
        std::vector<std::vector<int16_t>> quantized;
        std::vector<std::vector<float>> scales;
        testing::ForEachCpuKernelPath([&] {
          for (const bool from_bf16 : {false, true}) {
            quantized.emplace_back(shape.stride, int16_t{99});
            scales.emplace_back(groups, -1.0f);
            if (from_bf16) {
              QuantizeActivationRow(values.data(), shape.k, shape.stride, shape.group_size, groups, levels,
                                    quantized.back().data(), scales.back().data());
            } else {
              QuantizeActivationRow(floats.data(), shape.k, shape.stride, shape.group_size, groups, levels,
                                    quantized.back().data(), scales.back().data());
            }
          }
        });
        // Results alternate float32, bfloat16 inputs; each is compared with the portable path's of its kind.
        for (size_t result = 2; result < quantized.size(); ++result) {
          const size_t portable = result % 2;
          CHECK(quantized[result] == quantized[portable]);
          for (int64_t g = 0; g < groups; ++g) {
            const float a = scales[result][g], b = scales[portable][g];
            CHECK((a == b || (std::isnan(a) && std::isnan(b))));
          }
        }
        // From bfloat16 as from the float32 of the same values (trial 5's values are exact in bfloat16).
        if (trial == 5) CHECK(quantized[1] == quantized[0]);
      }
    }
  }
}

TEST_CASE("int8 weights: a packed int8 weight without matching scales is refused", "[unit][int8]") {
  const Int8Weight weight = MakeInt8(64, 64, 0);
  const at::Tensor input = at::randn({2, 64}), residual = at::zeros({2, 64});
  CHECK_THROWS(LinearResidual(input, weight.packed, at::ones({2, 1, 64}), residual));  // two panels of scales
  CHECK_THROWS(LinearResidual(input, weight.packed, at::ones({1, 3, 64}), residual));  // 3 groups of 64 / 3
  CHECK_THROWS(LinearResidual(input, weight.packed, at::empty({0}), residual));
}

}  // namespace
}  // namespace llmc::model::cpu
