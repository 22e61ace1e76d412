// int4 weights with zero points (asymmetric groups, int4_weight.h): packing of the scales and zero points, the
// composite's dequantization against (u - z) * scale, and every fused operator on packed weights with zero points
// against its composite on the dequantized weights, on every instruction-set path this machine has, forced one
// by one (the kernels' sums with the zero-point correction, and the dequantized panels of large batches).
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

double ZeroPointTolerance(at::ScalarType dtype) { return dtype == at::kFloat ? 1e-3 : 3e-2; }

// Random nibbles and an asymmetric group layout: scales [N, G] and zero points in 0..16 (0, 15 and 16, GPTQ's
// older checkpoints' largest, included), as the package stores them: [N, G, 2].
struct AsymmetricInt4 {
  at::Tensor bytes;   // uint8 [N, K / 2]
  at::Tensor scales;  // float32 [N, G, 2]
  at::Tensor dequantized;
};

AsymmetricInt4 MakeAsymmetric(int64_t n, int64_t k, int64_t group_size) {
  const at::Tensor bytes = at::randint(0, 256, {n, k / 2}, at::kByte);
  const at::Tensor scale = at::rand({n, k / group_size}) * 0.02 + 0.001;
  at::Tensor zero = at::randint(0, 17, {n, k / group_size}).to(at::kFloat);
  zero[0].fill_(0);
  zero[1].fill_(16);
  zero[2].fill_(15);
  // The independent reference: nibble i of a row is input i (low nibble first), W = (u - z) * scale.
  const at::Tensor u =
      at::stack({bytes.to(at::kInt) % 16, at::div(bytes.to(at::kInt), 16, "floor")}, 2).reshape({n, k});
  const at::Tensor dequantized =
      (u.to(at::kFloat) - zero.repeat_interleave(group_size, 1)) * scale.repeat_interleave(group_size, 1);
  return {bytes, at::stack({scale, zero}, 2), dequantized};
}

TEST_CASE("int4 zero points: the composite dequantizes (u - z) * scale, symmetric scales stay (u - 8) * scale",
          "[unit][int4]") {
  at::manual_seed(51);
  const AsymmetricInt4 w = MakeAsymmetric(70, 384, 64);
  CHECK(HasInt4ZeroPoints(w.scales));
  CHECK_FALSE(HasInt4ZeroPoints(w.scales.select(2, 0)));
  CHECK(composite::Dequantize(w.bytes, w.scales, at::kFloat).equal(w.dequantized));
  // Zero points of 8 everywhere are the symmetric layout's values, bit for bit.
  const at::Tensor eights = at::stack({w.scales.select(2, 0), at::full({70, 6}, 8.0)}, 2);
  CHECK(composite::Dequantize(w.bytes, eights, at::kFloat)
            .equal(composite::Dequantize(w.bytes, w.scales.select(2, 0).contiguous(), at::kFloat)));
}

TEST_CASE("int4 zero points: scales and zero points pack beside each other, in the weight's column order",
          "[unit][int4]") {
  at::manual_seed(52);
  const AsymmetricInt4 w = MakeAsymmetric(80, 128, 32);
  const std::vector<int64_t> order = GateUpColumnOrder(40);
  const at::Tensor packed_weight = PackInt4Weight(w.bytes, order);
  const at::Tensor packed = PackInt4Scales(w.scales, order);
  CHECK(packed.sizes() == at::IntArrayRef({2, 2, 4, kPanelWidth}));
  CHECK(IsPackedInt4Scales(packed, packed_weight));
  CHECK(packed[0].equal(PackScales(w.scales.select(2, 0).contiguous(), order)));
  CHECK(packed[1].equal(PackScales((8 - w.scales.select(2, 1)).contiguous(), order)));
  // Symmetric scales pack as before.
  const at::Tensor symmetric = w.scales.select(2, 0).contiguous();
  CHECK(PackInt4Scales(symmetric, order).equal(PackScales(symmetric, order)));
  CHECK(IsPackedInt4Scales(PackInt4Scales(symmetric, order), packed_weight));
  CHECK_FALSE(IsPackedInt4Scales(w.scales, packed_weight));
}

struct PackedAsymmetric {
  at::Tensor dequantized, packed, scales;
};

PackedAsymmetric Pack(const AsymmetricInt4& w, const std::vector<int64_t>& order = {}) {
  return {w.dequantized, PackInt4Weight(w.bytes, order), PackInt4Scales(w.scales, order)};
}

TEST_CASE("int4 zero points: linear_residual on every path matches the dequantized composition, M 1..33, 255, 300",
          "[unit][int4]") {
  const ScopedInt8Activations w4a16(Int8Activations::kInt16);
  at::manual_seed(53);
  const at::Tensor none = at::empty({0});
  std::vector<int64_t> rows;
  for (int64_t m = 1; m <= 33; ++m) rows.push_back(m);
  rows.push_back(255);  // the int4 kernels with the zero-point sums
  rows.push_back(300);  // dequantized panels into the plain kernels
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t group_size : {32, 64, 128}) {
      for (const int64_t k : {96, 160, 384}) {
        if (k % group_size != 0) continue;
        const int64_t n = 70;
        const PackedAsymmetric weight = Pack(MakeAsymmetric(n, k, group_size));
        for (const int64_t m : rows) {
          if (m > 8 && m < 33 && (m % 4 != 1 || k != 96)) continue;
          const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
          const at::Tensor expected =
              composite::LinearResidual(input.to(at::kFloat), weight.dequantized, none, residual.to(at::kFloat));
          testing::ForEachCpuKernelPath([&] {
            INFO("dtype " << dtype << " group " << group_size << " m " << m << " k " << k);
            const at::Tensor out = LinearResidual(input, weight.packed, weight.scales, residual);
            CHECK(out.scalar_type() == dtype);
            CHECK(RelativeError(out, expected) < ZeroPointTolerance(dtype));
          });
        }
      }
    }
  }
}

TEST_CASE("int4 zero points: zero points of 8 give the symmetric weight's bits on every path", "[unit][int4]") {
  const ScopedInt8Activations w4a16(Int8Activations::kInt16);
  at::manual_seed(54);
  const AsymmetricInt4 w = MakeAsymmetric(64, 256, 64);
  const at::Tensor symmetric_scales = w.scales.select(2, 0).contiguous();
  const at::Tensor eights = at::stack({symmetric_scales, at::full({64, 4}, 8.0)}, 2);
  const at::Tensor packed = PackInt4Weight(w.bytes);
  for (const int64_t m : {1, 9, 300}) {
    const at::Tensor input = Random({m, 256}, at::kFloat), residual_m = at::zeros({m, 64});
    testing::ForEachCpuKernelPath([&] {
      INFO("m " << m);
      CHECK(LinearResidual(input, packed, PackInt4Scales(eights), residual_m)
                .equal(LinearResidual(input, packed, PackInt4Scales(symmetric_scales), residual_m)));
    });
  }
}

TEST_CASE("int4 zero points: a dequantized prefill panel holds (u - z) * scale rounded once, on every path",
          "[unit][int4]") {
  at::manual_seed(57);
  for (const int64_t group_size : {32, 128}) {
    const int64_t k = 384;
    const AsymmetricInt4 w = MakeAsymmetric(kPanelWidth, k, group_size);
    const at::Tensor packed = PackInt4Weight(w.bytes);
    const at::Tensor scales = PackInt4Scales(w.scales);  // [2, panels, G, 64]: scales, then 8 - z
    const int64_t groups = k / group_size, k_padded = packed.size(1) * 8;
    const at::Tensor expected = w.dequantized.contiguous();
    const at::Tensor expected_bf16 = expected.to(at::kBFloat16).contiguous();
    testing::ForEachCpuKernelPath([&] {
      INFO("group " << group_size);
      const auto* bf16 = static_cast<const uint16_t*>(
          DequantizeInt4Panel(packed.data_ptr<uint8_t>(), scales[0].data_ptr<float>(), groups, k, k_padded,
                              at::kBFloat16, scales[1].data_ptr<float>()));
      int64_t mismatches = 0;
      for (int64_t c = 0; c < kPanelWidth; ++c) {
        for (int64_t kk = 0; kk < k; ++kk) {
          const uint16_t want = expected_bf16[c][kk].item<at::BFloat16>().x;
          mismatches += bf16[((kk / 2) * kPanelWidth + c) * 2 + kk % 2] != want;
        }
      }
      CHECK(mismatches == 0);
      const auto* fp32 =
          static_cast<const float*>(DequantizeInt4Panel(packed.data_ptr<uint8_t>(), scales[0].data_ptr<float>(), groups,
                                                        k, k_padded, at::kFloat, scales[1].data_ptr<float>()));
      const at::Tensor panel = at::from_blob(const_cast<float*>(fp32), {k, kPanelWidth}).t();
      CHECK(panel.equal(expected));
    });
    // Without zero points (symmetric weights) every path gives the portable path's bits.
    std::vector<std::vector<uint16_t>> symmetric;
    testing::ForEachCpuKernelPath([&] {
      const auto* bf16 = static_cast<const uint16_t*>(DequantizeInt4Panel(
          packed.data_ptr<uint8_t>(), scales[0].data_ptr<float>(), groups, k, k_padded, at::kBFloat16, nullptr));
      symmetric.emplace_back(bf16, bf16 + k_padded * kPanelWidth);
    });
    for (const std::vector<uint16_t>& path : symmetric) CHECK(path == symmetric.front());
  }
}

TEST_CASE("int4 zero points: every path sums the same integers", "[unit][int4]") {
  const ScopedInt8Activations w4a16(Int8Activations::kInt16);
  at::manual_seed(55);
  const PackedAsymmetric weight = Pack(MakeAsymmetric(64, 512, 128));
  const at::Tensor input = Random({9, 512}, at::kFloat), residual = at::zeros({9, 64});
  std::vector<at::Tensor> outputs;
  testing::ForEachCpuKernelPath(
      [&] { outputs.push_back(LinearResidual(input, weight.packed, weight.scales, residual)); });
  for (const at::Tensor& out : outputs) CHECK(RelativeError(out, outputs.front()) < 1e-6);
}

TEST_CASE("int4 zero points: gate/up, the LM head and the tied embedding on every path", "[unit][int4]") {
  const ScopedInt8Activations w4a16(Int8Activations::kInt16);
  at::manual_seed(56);
  const at::Tensor none = at::empty({0});
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t k = 192, intermediate = 40, vocab = 130;
    const at::Tensor norm = Random({k}, dtype);
    const PackedAsymmetric gate_up = Pack(MakeAsymmetric(2 * intermediate, k, 64), GateUpColumnOrder(intermediate));
    const PackedAsymmetric head = Pack(MakeAsymmetric(vocab, k, 32));
    for (const int64_t m : {1, 3, 7, 16, 33, 300}) {
      const at::Tensor hidden = Random({m, k}, dtype);
      const at::Tensor expected_act = composite::RmsNormGateUpSilu(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6,
                                                                   gate_up.dequantized, none, intermediate);
      const at::Tensor expected_logits =
          composite::RmsNormLmHead(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6, head.dequantized, none, vocab);
      testing::ForEachCpuKernelPath([&] {
        INFO("dtype " << dtype << " m " << m);
        CHECK(RelativeError(RmsNormGateUpSilu(hidden, norm, 1e-6, gate_up.packed, gate_up.scales, intermediate),
                            expected_act) < ZeroPointTolerance(dtype));
        CHECK(RelativeError(RmsNormLmHead(hidden, norm, 1e-6, head.packed, head.scales, vocab), expected_logits) <
              ZeroPointTolerance(dtype));
      });
    }
    const at::Tensor ids = at::tensor(std::vector<int64_t>{0, 129, 64, 63, 7, 1, 2}, at::kLong);
    const at::Tensor rows = Embed(ids, head.packed, head.scales, k);
    CHECK(rows.scalar_type() == at::kFloat);
    CHECK(rows.equal(head.dequantized.index_select(0, ids)));
  }
}

// The activations as W4A8 sees them: each group of each row at 127 levels of its largest magnitude.
at::Tensor ZeroPointW4A8Activations(const at::Tensor& x, int64_t group_size) {
  const int64_t m = x.size(0), k = x.size(1);
  const at::Tensor grouped = x.to(at::kFloat).reshape({m, k / group_size, group_size});
  const at::Tensor scale = (grouped.abs().amax(-1, /*keepdim=*/true) / 127).clamp_min(1e-30);
  return (at::round(grouped / scale).clamp(-127, 127) * scale).reshape({m, k});
}

TEST_CASE("int4 zero points: W4A8 adds the same correction to the byte activations' sums", "[unit][int4]") {
  if (DetectedCpuIsa() < CpuIsa::kAvx512Vnni) {
    WARN("no AVX512-VNNI here: W4A8 does not run");
    return;
  }
  at::manual_seed(57);
  const ScopedInt8Activations w4a8(Int8Activations::kInt8);
  const at::Tensor none = at::empty({0});
  for (const int64_t group_size : {32, 64, 128}) {
    const int64_t k = 256, n = 70;
    const PackedAsymmetric weight = Pack(MakeAsymmetric(n, k, group_size));
    // 64 and 300 rows: on AMX-INT8 the tiles (groups of 64 and 128, the correction added per 16-row block) or
    // dequantized panels against the unquantized rows (groups of 32).
    for (const int64_t m : {1, 2, 5, 16, 33, 64, 300}) {
      INFO("group " << group_size << " m " << m);
      const at::Tensor input = Random({m, k}, at::kFloat), residual = Random({m, n}, at::kFloat);
      const bool dequantized =
          ActiveCpuIsa() == CpuIsa::kAmx && m >= kAmxInt4DequantizedMinRows && !(HasAmxInt8() && group_size % 64 == 0);
      const at::Tensor expected = composite::LinearResidual(
          dequantized ? input : ZeroPointW4A8Activations(input, group_size), weight.dequantized, none, residual);
      CHECK(RelativeError(LinearResidual(input, weight.packed, weight.scales, residual), expected) < 1e-3);
    }
  }
}

TEST_CASE("int4 zero points: packed zero points on a weight that is not int4 are refused", "[unit][int4]") {
  const at::Tensor weight = PackWeight(Random({64, 128}, at::kFloat).to(at::kChar));
  const at::Tensor scales = at::ones({2, 1, 4, kPanelWidth});
  const at::Tensor input = Random({2, 128}, at::kFloat), residual = at::zeros({2, 64});
  CHECK_THROWS(LinearResidual(input, weight, scales, residual));
}

}  // namespace
}  // namespace llmc::model::cpu
