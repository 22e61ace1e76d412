// int4 weights: the quantizer against the exporter's formula, pack/unpack round trips, and every fused operator on
// packed int4 weights against its composite on the dequantized weights, on every instruction-set path this machine
// has (portable, AVX2, AVX512-VNNI), forced one by one: W4A16 (int16 activations) on every path, and W4A8 (the
// activations as bytes, AVX512-VNNI) against the same sums of the byte-quantized activations.
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/int4_requantized.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int4_requantize.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

// As for int8: the activations' int16 rounding, below bfloat16's, beside the weights' own (which the
// dequantized reference shares).
double Int4Tolerance(at::ScalarType dtype) { return dtype == at::kFloat ? 1e-3 : 3e-2; }

// The nibbles of float64 groups rounded at `rounding` [N, G, 1], as the exporter rounds them.
at::Tensor Nibbles(const at::Tensor& x, const at::Tensor& rounding) {
  return at::round(x * (1.0 / rounding)).clamp(-8, 7);
}

// The scales of the plain rule: a group's largest magnitude on -8 (scale amax / 8) or on 7 (amax / 7).
at::Tensor PlainScales(const at::Tensor& grouped) {
  const at::Tensor amax = grouped.abs().amax(-1);
  const at::Tensor extreme = grouped.gather(-1, grouped.abs().argmax(-1, /*keepdim=*/true)).squeeze(-1);
  return at::where(amax == 0, at::ones_like(amax), at::where(extreme < 0, amax / 8, amax / 7));
}

// tools/llmc_export/quantize.py's quantize_int4 in ATen, its sums in ATen's order (QuantizeInt4 sums in its own),
// which QuantizeInt4 must give bit for bit: the plain candidate, then the rounding at amax / d with its
// least-squares scale for each searched d; the candidate of least squared error.
std::pair<at::Tensor, at::Tensor> ExporterInt4Quantize(const at::Tensor& weight, int64_t group_size) {
  const int64_t n = weight.size(0), k = weight.size(1);
  const at::Tensor grouped = weight.to(at::kFloat).reshape({n, k / group_size, group_size});
  const at::Tensor x = grouped.to(at::kDouble);
  const at::Tensor amax = x.abs().amax(-1, /*keepdim=*/true);
  const at::Tensor live = amax > 0;
  at::Tensor best_scale = PlainScales(grouped).to(at::kDouble).unsqueeze(-1);
  at::Tensor best_rounding = best_scale;
  at::Tensor q = Nibbles(x, best_rounding);
  at::Tensor best_error =
      best_scale * best_scale * (q * q).sum(-1, true) - 2 * best_scale * (x * q).sum(-1, /*keepdim=*/true);
  for (const double divisor : {6.5, 7.0, 7.5, 8.0, 8.5, 9.0, 9.5, 10.0}) {
    const at::Tensor rounding = at::where(live, amax / divisor, best_rounding);
    q = Nibbles(x, rounding);
    const at::Tensor qq = (q * q).sum(-1, true), xq = (x * q).sum(-1, true);
    const at::Tensor scale = at::where(live, (xq / qq).to(at::kFloat).to(at::kDouble), best_scale);
    const at::Tensor error = scale * scale * qq - 2 * scale * xq;
    const at::Tensor better = error < best_error;
    best_scale = at::where(better, scale, best_scale);
    best_rounding = at::where(better, rounding, best_rounding);
    best_error = at::where(better, error, best_error);
  }
  const at::Tensor nibbles = Nibbles(x, best_rounding).to(at::kShort).reshape({n, k}) + 8;
  using at::indexing::Slice;
  const at::Tensor low = nibbles.index({Slice(), Slice(0, c10::nullopt, 2)});
  const at::Tensor high = nibbles.index({Slice(), Slice(1, c10::nullopt, 2)});
  return {(low + high * 16).to(at::kByte), best_scale.squeeze(-1).to(at::kFloat)};
}

TEST_CASE("int4 weights: quantize gives the exporter's values, errs no more than the plain rule, zero rows",
          "[unit][int4]") {
  at::manual_seed(41);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t group_size : {32, 64, 128}) {
      INFO("dtype " << dtype << " group size " << group_size);
      at::Tensor weight = Random({70, 384}, dtype, 0.05);
      weight[3].zero_();
      const auto [q, scales] = QuantizeInt4(weight, group_size);
      CHECK(q.scalar_type() == at::kByte);
      CHECK(q.sizes() == at::IntArrayRef({70, 192}));
      CHECK(scales.sizes() == at::IntArrayRef({70, 384 / group_size}));
      const auto [want_q, want_scales] = ExporterInt4Quantize(weight, group_size);
      // The search's sums on every instruction-set path (SumInt4Nibbles*), each the exporter's bit for bit.
      testing::ForEachCpuKernelPath([&, &want_q = want_q, &want_scales = want_scales] {
        const auto [path_q, path_scales] = QuantizeInt4(weight, group_size);
        CHECK(at::equal(path_q, want_q));
        CHECK(at::equal(path_scales, want_scales));
      });
      CHECK(at::equal(q, want_q));
      CHECK(at::equal(scales, want_scales));
      CHECK(scales[3].eq(1.0).all().item<bool>());
      CHECK(q[3].eq(0x88).all().item<bool>());
      // Each group errs no more than under the plain rule, and the search does change groups, to less error.
      const at::Tensor exact = weight.to(at::kDouble);
      const at::Tensor grouped = exact.reshape({70, -1, group_size});
      const at::Tensor searched_error =
          (composite::Dequantize(q, scales, at::kFloat).to(at::kDouble) - exact).pow(2).reshape({70, -1, group_size});
      const at::Tensor plain = PlainScales(weight.to(at::kFloat).reshape({70, -1, group_size})).unsqueeze(-1);
      const at::Tensor plain_values = (at::round(grouped / plain).clamp(-8, 7) * plain).to(at::kFloat);
      const at::Tensor plain_error = (plain_values.to(at::kDouble) - grouped).pow(2);
      CHECK((searched_error.sum(-1) <= plain_error.sum(-1) * (1 + 1e-6)).all().item<bool>());
      CHECK(searched_error.sum().item<double>() < 0.95 * plain_error.sum().item<double>());
      CHECK(scales.ne(plain.squeeze(-1)).any().item<bool>());
      // A weight clipped by a finer scale is the group's extreme nibble, within a few steps of it.
      const at::Tensor step = scales.repeat_interleave(group_size, 1).to(at::kDouble);
      const at::Tensor error = (composite::Dequantize(q, scales, at::kFloat).to(at::kDouble) - exact).abs();
      CHECK((error <= step * 4).all().item<bool>());
    }
  }
  CHECK_THROWS(QuantizeInt4(at::randn({4, 96}), 64));    // 64 does not divide 96
  CHECK_THROWS(QuantizeInt4(at::randn({4, 512}), 256));  // not an int4 group size
  CHECK_THROWS(QuantizeInt4(at::randn({4, 512}), 0));    // int4 needs groups
  CHECK_FALSE(IsSupportedInt4GroupSize(256));
}

TEST_CASE("int4 weights: packing round trips, with column orders and -8", "[unit][int4]") {
  at::manual_seed(42);
  // Every byte value, -8 (nibble 0) included, in odd shapes: 70 rows (a partial panel), 48 bytes (K = 96).
  const at::Tensor bytes = at::randint(0, 256, {70, 48}, at::kByte);
  const at::Tensor packed = PackInt4Weight(bytes);
  CHECK(IsPackedInt4Weight(packed));
  CHECK(IsPackedWeight(packed));
  CHECK(PackedDepth(packed) == 96);
  CHECK(packed.numel() == PackedInt4WeightBytes(bytes));
  CHECK(packed.sizes() == at::IntArrayRef({2, 12, kPanelWidth, 4}));
  CHECK(at::equal(UnpackInt4Weight(packed, 70, 96), bytes));
  // Padding columns hold zeros (nibble 8 once unpacked: q = 0).
  CHECK(UnpackInt4Weight(packed, 128, 96).narrow(0, 70, 58).eq(0x88).all().item<bool>());
  const std::vector<int64_t> order = GateUpColumnOrder(35);
  const at::Tensor reordered = PackInt4Weight(bytes, order);
  const at::Tensor unpacked = UnpackInt4Weight(reordered, static_cast<int64_t>(order.size()), 96);
  for (size_t c = 0; c < order.size(); ++c) {
    if (order[c] >= 0) CHECK(at::equal(unpacked[static_cast<int64_t>(c)], bytes[order[c]]));
  }
  CHECK_THROWS(PackInt4Weight(at::zeros({4, 8}, at::kChar)));
}

struct Int4Weight {
  at::Tensor dequantized;  // float32 [N, K], the reference's matrix
  at::Tensor packed, scales;
};

// `quiet_group`: the first group of inputs 100 times quieter than the rest, so that the weight does not requantize
// to int8 (int4_requantize.h) and large batches on AMX-INT8 tiles keep their sums per group.
Int4Weight MakeInt4(int64_t n, int64_t k, int64_t group_size, const std::vector<int64_t>& order = {},
                    bool quiet_group = false) {
  at::Tensor weight = Random({n, k}, at::kFloat, 0.1);
  if (quiet_group) weight.narrow(1, 0, group_size).mul_(0.01);
  const auto [q, scales] = QuantizeInt4(weight, group_size);
  return {composite::Dequantize(q, scales, at::kFloat), PackInt4Weight(q, order), PackScales(scales, order)};
}

TEST_CASE("int4 weights: linear_residual on every path matches the dequantized composition, M 1..33, 255, 300",
          "[unit][int4]") {
  const ScopedInt8Activations w4a16(Int8Activations::kInt16);
  at::manual_seed(43);
  const at::Tensor none = at::empty({0});
  std::vector<int64_t> rows;
  for (int64_t m = 1; m <= 33; ++m) rows.push_back(m);
  rows.push_back(255);  // the int4 kernels
  rows.push_back(300);  // dequantized panels into the plain kernels
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t group_size : {32, 64, 128}) {
      // 96 and 160: an odd number of groups of 32; 384 = three groups of 128.
      for (const int64_t k : {96, 160, 384}) {
        if (k % group_size != 0) continue;
        const int64_t n = 70;
        const Int4Weight weight = MakeInt4(n, k, group_size);
        for (const int64_t m : rows) {
          if (m > 8 && m < 33 && (m % 4 != 1 || k != 96)) continue;  // the row blocks, without repeating them all
          const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
          const at::Tensor expected =
              composite::LinearResidual(input.to(at::kFloat), weight.dequantized, none, residual.to(at::kFloat));
          testing::ForEachCpuKernelPath([&] {
            INFO("dtype " << dtype << " group " << group_size << " m " << m << " k " << k);
            const at::Tensor out = LinearResidual(input, weight.packed, weight.scales, residual);
            CHECK(out.scalar_type() == dtype);
            CHECK(RelativeError(out, expected) < Int4Tolerance(dtype));
          });
        }
      }
    }
  }
}

TEST_CASE("int4 weights: gate/up, the LM head and the tied embedding on every path", "[unit][int4]") {
  const ScopedInt8Activations w4a16(Int8Activations::kInt16);
  at::manual_seed(44);
  const at::Tensor none = at::empty({0});
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t k = 192, intermediate = 40, vocab = 130;
    const at::Tensor norm = Random({k}, dtype);
    const Int4Weight gate_up = MakeInt4(2 * intermediate, k, 64, GateUpColumnOrder(intermediate));
    const Int4Weight head = MakeInt4(vocab, k, 32);
    for (const int64_t m : {1, 3, 7, 16, 33}) {
      const at::Tensor hidden = Random({m, k}, dtype);
      const at::Tensor expected_act = composite::RmsNormGateUpSilu(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6,
                                                                   gate_up.dequantized, none, intermediate);
      const at::Tensor expected_logits =
          composite::RmsNormLmHead(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6, head.dequantized, none, vocab);
      testing::ForEachCpuKernelPath([&] {
        INFO("dtype " << dtype << " m " << m);
        CHECK(RelativeError(RmsNormGateUpSilu(hidden, norm, 1e-6, gate_up.packed, gate_up.scales, intermediate),
                            expected_act) < Int4Tolerance(dtype));
        CHECK(RelativeError(RmsNormLmHead(hidden, norm, 1e-6, head.packed, head.scales, vocab), expected_logits) <
              Int4Tolerance(dtype));
      });
    }
    const at::Tensor ids = at::tensor(std::vector<int64_t>{0, 129, 64, 63, 7}, at::kLong);
    const at::Tensor rows = Embed(ids, head.packed, head.scales, k);
    CHECK(rows.scalar_type() == at::kFloat);
    CHECK(rows.equal(head.dequantized.index_select(0, ids)));
  }
}

TEST_CASE("int4 weights: every path sums the same integers", "[unit][int4]") {
  const ScopedInt8Activations w4a16(Int8Activations::kInt16);
  at::manual_seed(45);
  const Int4Weight weight = MakeInt4(64, 512, 128);
  const at::Tensor input = Random({9, 512}, at::kFloat), residual = at::zeros({9, 64});
  std::vector<at::Tensor> outputs;
  testing::ForEachCpuKernelPath(
      [&] { outputs.push_back(LinearResidual(input, weight.packed, weight.scales, residual)); });
  for (const at::Tensor& out : outputs) CHECK(RelativeError(out, outputs.front()) < 1e-6);
}

// The activations as W4A8 sees them: each group of `group_size` inputs of each row at 127 levels of its largest
// magnitude (times the scale's float32 inverse, rounded half to even, as the quantizer does), back in float32.
at::Tensor ByteQuantized(const at::Tensor& x, int64_t group_size) {
  const int64_t m = x.size(0), k = x.size(1);
  const at::Tensor grouped = x.to(at::kFloat).reshape({m, k / group_size, group_size});
  const at::Tensor scale = grouped.abs().amax(-1, /*keepdim=*/true) / 127;
  return (at::round(grouped * at::reciprocal(scale)).clamp(-127, 127) * scale).reshape({m, k});
}

TEST_CASE("int4 weights: W4A8 sums the int4 weights against the activations quantized to bytes, M 1..33, 300",
          "[unit][int4]") {
  if (DetectedCpuIsa() < CpuIsa::kAvx512Vnni) {
    WARN("no AVX512-VNNI here: W4A8 does not run (int4 weights take int16 activations)");
    return;
  }
  at::manual_seed(46);
  const ScopedInt8Activations w4a8(Int8Activations::kInt8);
  const at::Tensor none = at::empty({0});
  std::vector<int64_t> rows;
  for (int64_t m = 1; m <= 13; ++m) rows.push_back(m);
  // Prefill-sized batches too: without AMX still bytes; on AMX bytes on the tiles (groups of 64 and 128, where
  // the CPU has AMX-INT8) or the vectors (32), and groups of 32 from kAmxInt4DequantizedMinRows rows dequantized
  // panels against the unquantized rows.
  for (const int64_t m : {16, 33, 64, 300}) rows.push_back(m);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t group_size : {32, 64, 128}) {
      for (const int64_t k : {256, 384}) {
        if (k % group_size != 0) continue;
        const int64_t n = 70;
        const Int4Weight weight = MakeInt4(n, k, group_size);
        for (const int64_t m : rows) {
          const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
          // From Int4RequantizedMinRows() rows the tiles (or, on the avx512_vnni path, PanelW8A8Avx512) multiply the
          // weight requantized to int8, one activation scale per row.
          const bool requantized = RequantizesLargeInt4Batches() && m >= Int4RequantizedMinRows() &&
                                   Int4RequantizesToInt8(PanelWeight(weight.packed, weight.scales));
          const bool on_tiles = HasAmxInt8() && group_size % 64 == 0;
          const bool dequantized =
              !requantized && ActiveCpuIsa() == CpuIsa::kAmx && m >= kAmxInt4DequantizedMinRows && !on_tiles;
          const at::Tensor expected =
              requantized
                  ? composite::LinearResidual(testing::RowWideByteQuantized(input),
                                              testing::RequantizedInt4Matrix(weight.packed, weight.scales, n, k), none,
                                              residual.to(at::kFloat))
                  : composite::LinearResidual(dequantized ? input.to(at::kFloat) : ByteQuantized(input, group_size),
                                              weight.dequantized, none, residual.to(at::kFloat));
          INFO("dtype " << dtype << " group " << group_size << " m " << m << " k " << k);
          const at::Tensor out = LinearResidual(input, weight.packed, weight.scales, residual);
          // bfloat16 output rounding aside, the same sums: a byte or nibble out of order is off by O(1).
          CHECK(RelativeError(out, expected) < (dtype == at::kFloat ? 1e-4 : 1e-2));
          // And near the float result, as W8A8 is.
          CHECK(RelativeError(out, composite::LinearResidual(input.to(at::kFloat), weight.dequantized, none,
                                                             residual.to(at::kFloat))) < 3e-2);
        }
      }
    }
  }
}

TEST_CASE("int4 weights: W4A16 and W4A8 give the same bits whichever cache their weights are prefetched into",
          "[unit][int4]") {
  at::manual_seed(47);
  for (const Int8Activations activations : {Int8Activations::kInt16, Int8Activations::kInt8}) {
    const ScopedInt8Activations scoped(activations);
    for (const int64_t group_size : {32, 128}) {
      const int64_t n = 136, k = 1024;  // a partial panel; the prefetches run past a panel's end
      const Int4Weight weight = MakeInt4(n, k, group_size);
      for (const int64_t m : {1, 2, 6, 7, 13}) {
        const at::Tensor input = Random({m, k}, at::kBFloat16), residual = Random({m, n}, at::kBFloat16);
        testing::ForEachCpuKernelPath([&] {
          std::vector<at::Tensor> outputs;
          testing::ForEachWeightPrefetch(
              [&] { outputs.push_back(LinearResidual(input, weight.packed, weight.scales, residual)); });
          INFO("activations " << static_cast<int>(activations) << " group " << group_size << " m " << m);
          CHECK(at::equal(outputs[0], outputs[1]));
        });
      }
    }
  }
}

TEST_CASE("int4 weights: W4A8 batches on AMX-INT8 tiles sum exactly the integers of the AVX512 byte kernel",
          "[unit][int4]") {
  if (!HasAmxInt8()) {
    WARN("no AMX-INT8 here (" << DescribeCpu() << "): the int4 tile kernel is not exercised");
    return;
  }
  at::manual_seed(48);
  const ScopedInt8Activations w4a8(Int8Activations::kInt8);
  struct Reset {
    ~Reset() { ResetCpuIsa(); }
  } reset;
  // Groups of whole tile steps (64 inputs) from 16 rows run on the tiles, prefill-sized batches too where the
  // weight does not requantize (a quiet group; int4_requantize_test.cc has those that do); the same batches forced
  // onto the avx512_bf16 path run PanelW4A8Avx512.
  for (const int64_t group_size : {64, 128}) {
    for (const int64_t k : {128, 896, 4864}) {
      const int64_t n = 136;
      const Int4Weight weight = MakeInt4(n, k, group_size, {}, /*quiet_group=*/true);
      // One group has nothing quieter to compare with.
      const bool requantizes = Int4RequantizesToInt8(PanelWeight(weight.packed, weight.scales));
      CHECK(requantizes == (k == group_size));
      for (const int64_t m : {16, 17, 33, 64, 300}) {
        if (requantizes && m >= kInt4RequantizedMinRowsOnTiles) continue;
        for (const auto dtype : {at::kFloat, at::kBFloat16}) {
          INFO("group " << group_size << " k " << k << " m " << m << " dtype " << dtype);
          const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
          REQUIRE(ForceCpuIsa(CpuIsa::kAmx).ok());
          const at::Tensor tiles = LinearResidual(input, weight.packed, weight.scales, residual);
          REQUIRE(ForceCpuIsa(CpuIsa::kAvx512Bf16).ok());
          const at::Tensor vectors = LinearResidual(input, weight.packed, weight.scales, residual);
          CHECK(at::equal(tiles, vectors));
        }
      }
    }
  }
}

TEST_CASE("int4 weights: a packed int4 weight without matching scales is refused", "[unit][int4]") {
  const Int4Weight weight = MakeInt4(64, 128, 32);
  const at::Tensor input = Random({2, 128}, at::kFloat), residual = at::zeros({2, 64});
  CHECK_THROWS(LinearResidual(input, weight.packed, at::empty({0}), residual));
  CHECK_THROWS(LinearResidual(input, weight.packed, weight.scales.narrow(1, 0, 3).contiguous(), residual));
}

}  // namespace
}  // namespace llmc::model::cpu
