// MXFP4 weights (worker/model/cpu/mxfp4_weight.h): the dequantization against the format's definition written
// here, and projections on packed MXFP4 weights against their composite: float32 activations (dequantized panels,
// exact) on every instruction-set path this machine has, bfloat16 activations as bytes on AVX512-VNNI (the same sums
// as the byte-quantized activations give) and on dequantized bfloat16 panels elsewhere.
#include <cmath>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/mxfp4_weight.h"
#include "worker/model/cpu/packed_weight.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

// OCP Microscaling Formats v1.0: E2M1 with its exponent bias of 1 (bits s e e m: subnormal 0.5 * m when e = 0,
// else 2^(e - 1) * (1 + m / 2)) and an E8M0 scale 2^(x - 127).
float E2M1(int code) {
  const int sign = code >> 3, exponent = (code >> 1) & 3, mantissa = code & 1;
  const float magnitude = exponent == 0 ? 0.5f * mantissa : std::ldexp(1.0f + 0.5f * mantissa, exponent - 1);
  return sign != 0 ? -magnitude : magnitude;
}

at::Tensor Definition(const at::Tensor& codes, const at::Tensor& exponents) {
  const int64_t n = codes.size(0), k = 2 * codes.size(1);
  at::Tensor out = at::empty({n, k});
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t i = 0; i < k; ++i) {
      const int byte = codes[row][i / 2].item<int>();
      const int code = i % 2 == 0 ? byte & 15 : byte >> 4;  // input 2i in the low nibble
      const int exponent = exponents[row][i / kMxfp4GroupSize].item<int>();
      out[row][i] = E2M1(code) * std::ldexp(1.0f, exponent - 127);
    }
  }
  return out;
}

struct Mxfp4Weight {
  at::Tensor codes, exponents;
  at::Tensor dequantized;  // float32 [N, K]
  at::Tensor packed, packed_exponents;
};

Mxfp4Weight MakeMxfp4(int64_t n, int64_t k, const std::vector<int64_t>& order = {}) {
  Mxfp4Weight weight;
  weight.codes = at::randint(0, 256, {n, k / 2}, at::kByte);
  weight.exponents = at::randint(118, 124, {n, k / kMxfp4GroupSize}, at::kByte);
  weight.dequantized = DequantizeMxfp4(weight.codes, weight.exponents);
  weight.packed = PackInt4Weight(weight.codes, order);
  weight.packed_exponents = PackMxfp4Scales(weight.exponents, order);
  return weight;
}

// The activations as the byte staging quantizes them: groups of 32, 127 levels.
at::Tensor ByteQuantized(const at::Tensor& x) {
  const int64_t m = x.size(0), k = x.size(1);
  const at::Tensor grouped = x.to(at::kFloat).reshape({m, k / kMxfp4GroupSize, kMxfp4GroupSize});
  const at::Tensor scale = grouped.abs().amax(-1, /*keepdim=*/true) / 127;
  return (at::round(grouped * at::reciprocal(scale)).clamp(-127, 127) * scale).reshape({m, k});
}

TEST_CASE("mxfp4 weights: dequantization is the format's definition, every code and the extreme exponents",
          "[unit][mxfp4]") {
  // Every code in both nibbles, every exponent from 0 (2^-127, a subnormal) to 254.
  at::Tensor codes = at::arange(256, at::kInt).to(at::kByte).reshape({8, 32});
  at::Tensor exponents = at::tensor({0, 1, 64, 120, 127, 128, 200, 254}, at::kInt).to(at::kByte).reshape({8, 1});
  exponents = exponents.repeat({1, 2});
  const at::Tensor definition = Definition(codes, exponents);
  CHECK(at::equal(DequantizeMxfp4(codes, exponents), definition));
  // Row 4 (exponent 127, 2^0) holds bytes 128..159: byte 129 is code 1 (0.5) low and code 8 (-0) high.
  CHECK(definition[4][2].item<float>() == 0.5f);
  CHECK(definition[4][3].item<float>() == 0.0f);
  CHECK(E2M1(7) == 6.0f);
  CHECK(E2M1(15) == -6.0f);
  CHECK(E2M1(8) == 0.0f);  // -0
  // The kernels' doubled values are twice the definition's, indexed by the packed nibble (code ^ 8).
  for (int code = 0; code < 16; ++code) CHECK(kMxfp4DoubledValues[code ^ 8] == 2.0f * E2M1(code));
  for (const int e : {0, 1, 127, 254}) CHECK(Mxfp4HalfScale(static_cast<uint8_t>(e)) == std::ldexp(0.5f, e - 127));
}

TEST_CASE("mxfp4 weights: linear_residual and gate/up on packed weights match the composite, every path",
          "[unit][mxfp4]") {
  at::manual_seed(53);
  const at::Tensor none = at::empty({0});
  for (const int64_t k : {64, 96, 256}) {
    const int64_t n = 70;  // a partial panel
    const Mxfp4Weight weight = MakeMxfp4(n, k);
    for (const int64_t m : {1, 2, 5, 6, 7, 13, 33, 300}) {
      for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
        const at::Tensor expected =
            composite::LinearResidual(input.to(at::kFloat), weight.dequantized, none, residual.to(at::kFloat));
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " m " << m << " k " << k);
          const at::Tensor out = LinearResidual(input, weight.packed, weight.packed_exponents, residual);
          CHECK(out.scalar_type() == dtype);
          if (dtype == at::kFloat) {
            CHECK(RelativeError(out, expected) < 1e-5);  // dequantized panels: the same products
            return;
          }
          CHECK(RelativeError(out, expected) < 3e-2);
          if (ActiveCpuIsa() >= CpuIsa::kAvx512Vnni) {
            // Bytes: the sums of the byte-quantized activations exactly, but for bfloat16's output rounding.
            CHECK(RelativeError(out, composite::LinearResidual(ByteQuantized(input), weight.dequantized, none,
                                                               residual.to(at::kFloat))) < 1e-2);
            testing::ForEachWeightPrefetch([&] {
              CHECK(at::equal(LinearResidual(input, weight.packed, weight.packed_exponents, residual), out));
            });
          }
        });
      }
    }
  }
  // gate/up in the loader's column order.
  const int64_t hidden = 128, intermediate = 96;
  const Mxfp4Weight gate_up = MakeMxfp4(2 * intermediate, hidden, GateUpColumnOrder(intermediate));
  const at::Tensor norm = Random({hidden}, at::kFloat, 0.2) + 1.0;
  for (const int64_t m : {1, 9}) {
    const at::Tensor x = Random({m, hidden}, at::kFloat);
    const at::Tensor expected = composite::RmsNormGateUpSilu(x, norm, 1e-6, gate_up.dequantized, none, intermediate);
    testing::ForEachCpuKernelPath([&] {
      INFO("gate/up m " << m);
      CHECK(RelativeError(RmsNormGateUpSilu(x, norm, 1e-6, gate_up.packed, gate_up.packed_exponents, intermediate),
                          expected) < 1e-5);
      CHECK(RelativeError(RmsNormGateUpSilu(x.to(at::kBFloat16), norm.to(at::kBFloat16), 1e-6, gate_up.packed,
                                            gate_up.packed_exponents, intermediate),
                          expected) < 5e-2);
    });
  }
}

TEST_CASE("mxfp4 weights: exponents that do not fit the weight are refused", "[unit][mxfp4]") {
  const Mxfp4Weight weight = MakeMxfp4(64, 128);
  const at::Tensor input = Random({2, 128}, at::kFloat), residual = at::zeros({2, 64});
  CHECK_THROWS(LinearResidual(input, weight.packed, weight.packed_exponents.narrow(1, 0, 3).contiguous(), residual));
  CHECK_THROWS(LinearResidual(input, weight.packed, PackMxfp4Scales(weight.exponents.narrow(0, 0, 0)), residual));
  CHECK_THROWS(DequantizeMxfp4(weight.codes, weight.exponents.narrow(1, 0, 3)));
  CHECK_THROWS(PackMxfp4Scales(weight.exponents.to(at::kFloat)));
}

}  // namespace
}  // namespace llmc::model::cpu
