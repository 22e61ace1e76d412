// The mixture-of-experts operator: routing rules (ties to the lower expert, renormalization, grouping by expert),
// and the CPU kernel on packed weights against the composite on the same weights, for float32 and bfloat16
// activations, plain, int8, int4 (with and without zero points) and MXFP4 experts, batches of 1 to 33 rows, on every
// kernel path this machine has; with routers that tie every expert, that send every row to one expert, and that
// spread the rows over all of them.
#include "worker/model/cpu/moe_ops.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/team_size.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/mxfp4_weight.h"
#include "worker/model/cpu/packed_weight.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

TEST_CASE("moe routing: the largest probabilities, ties to the lower expert, renormalized when asked", "[unit][moe]") {
  // Row 0: experts 1 and 3 tie for the top, 0 and 2 below; row 1: all four tie.
  const at::Tensor logits = at::tensor({0.0f, 2.0f, 1.0f, 2.0f, 0.5f, 0.5f, 0.5f, 0.5f}).reshape({2, 4});
  const ExpertChoices plain = ChooseExperts(logits, 2, /*normalize_top_k=*/false);
  CHECK(plain.experts == std::vector<int32_t>{1, 3, 0, 1});
  const at::Tensor probabilities = at::softmax(logits, 1);
  CHECK(plain.weights[0] == Approx(probabilities[0][1].item<float>()));
  CHECK(plain.weights[2] == Approx(0.25f));
  const ExpertChoices normalized = ChooseExperts(logits, 2, /*normalize_top_k=*/true);
  CHECK(normalized.weights == std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f});
  const ExpertGroups groups = GroupByExpert(normalized, 4);
  CHECK(groups.offsets == std::vector<int64_t>{0, 1, 3, 3, 4});  // expert 0: row 1; 1: rows 0, 1; 3: row 0
  CHECK(groups.rows == std::vector<int64_t>{1, 0, 1, 0});
  CHECK(groups.active_experts == 3);
}

enum class ExpertWeights { kPlain, kInt8, kInt4, kInt4ZeroPoints, kMxfp4 };

const char* Name(ExpertWeights kind) {
  switch (kind) {
    case ExpertWeights::kPlain:
      return "plain";
    case ExpertWeights::kInt8:
      return "int8";
    case ExpertWeights::kInt4:
      return "int4";
    case ExpertWeights::kInt4ZeroPoints:
      return "int4 with zero points";
    case ExpertWeights::kMxfp4:
      return "MXFP4";
  }
  return "?";
}

// Experts' weights as the package holds them (plain, int8 or int4 with scales) and packed as the loader packs them.
struct Experts {
  std::vector<at::Tensor> gate_up, gate_up_scales, down, down_scales;
  std::vector<at::Tensor> packed_gate_up, packed_gate_up_scales, packed_down, packed_down_scales;
};

std::pair<at::Tensor, at::Tensor> Quantized(const at::Tensor& weight, ExpertWeights kind) {
  switch (kind) {
    case ExpertWeights::kPlain:
      return {weight, at::empty({0}, at::kFloat)};
    case ExpertWeights::kInt8:
      return QuantizeInt8(weight, 32);
    case ExpertWeights::kInt4:
      return QuantizeInt4(weight, 32);
    case ExpertWeights::kInt4ZeroPoints: {
      auto [q, scales] = QuantizeInt4(weight, 32);
      // Zero points from 5 to 11 in place of 8: the weights the composite dequantizes are what they stand for.
      const at::Tensor zeros = at::randint(5, 12, scales.sizes(), at::kFloat);
      return {q, at::stack({scales, zeros}, 2)};
    }
    case ExpertWeights::kMxfp4:
      // Any codes, exponents from 2^-6 to 2^-2 (typical values near int4's): the weights are what the format says.
      return {at::randint(0, 256, {weight.size(0), weight.size(1) / 2}, at::kByte),
              at::randint(121, 126, {weight.size(0), weight.size(1) / kMxfp4GroupSize}, at::kByte)};
  }
  return {};
}

Experts MakeExperts(int64_t count, int64_t hidden, int64_t width, at::ScalarType dtype, ExpertWeights kind) {
  Experts experts;
  for (int64_t e = 0; e < count; ++e) {
    for (const bool gate_up : {true, false}) {
      const at::Tensor weight = gate_up ? Random({2 * width, hidden}, dtype, 0.2) : Random({hidden, width}, dtype, 0.2);
      auto [matrix, scales] = Quantized(weight, kind);
      const std::vector<int64_t> order = gate_up ? GateUpColumnOrder(width) : std::vector<int64_t>{};
      at::Tensor packed, packed_scales = scales;
      if (matrix.scalar_type() == at::kByte) {
        packed = PackInt4Weight(matrix, order);
        packed_scales = IsMxfp4Scales(scales) ? PackMxfp4Scales(scales, order) : PackInt4Scales(scales, order);
      } else {
        packed = PackWeight(matrix, order);
        if (matrix.scalar_type() == at::kChar) packed_scales = PackScales(scales, order);
      }
      (gate_up ? experts.gate_up : experts.down).push_back(matrix);
      (gate_up ? experts.gate_up_scales : experts.down_scales).push_back(scales);
      (gate_up ? experts.packed_gate_up : experts.packed_down).push_back(packed);
      (gate_up ? experts.packed_gate_up_scales : experts.packed_down_scales).push_back(packed_scales);
    }
  }
  return experts;
}

enum class Router { kRandom, kAllTied, kOneExpertTakesAll };

// The reference routing: RMSNorm as ops.py's reference, the router's logits in the activations' dtype, the
// float32 softmax and its top_k (ChooseExperts' rule).
ExpertChoices ReferenceChoices(const at::Tensor& hidden, const at::Tensor& norm, const at::Tensor& router,
                               int64_t top_k, bool normalize) {
  const at::Tensor x = hidden.to(at::kFloat);
  const at::Tensor normalized =
      (x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * norm.to(at::kFloat)).to(hidden.scalar_type());
  return ChooseExperts(at::linear(normalized, router).to(at::kFloat).contiguous(), top_k, normalize);
}

// The kernel's choices are the reference's but where the reference's top_k-th and next probabilities are so
// close that the kernel's own rounding of the router may order them the other way (within 1 %); such rows are
// few. Returns the rows where they differ.
int CheckChoices(const ExpertChoices& kernel, const ExpertChoices& reference, const at::Tensor& probabilities) {
  REQUIRE(kernel.rows == reference.rows);
  REQUIRE(kernel.top_k == reference.top_k);
  int differing = 0;
  for (int64_t row = 0; row < kernel.rows; ++row) {
    std::vector<int32_t> ours(kernel.experts.begin() + row * kernel.top_k,
                              kernel.experts.begin() + (row + 1) * kernel.top_k);
    std::vector<int32_t> theirs(reference.experts.begin() + row * kernel.top_k,
                                reference.experts.begin() + (row + 1) * kernel.top_k);
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    if (ours == theirs) continue;
    ++differing;
    const at::Tensor sorted = std::get<0>(probabilities[row].sort(/*dim=*/0, /*descending=*/true));
    const float last = sorted[kernel.top_k - 1].item<float>();
    const float next = kernel.top_k < sorted.size(0) ? sorted[kernel.top_k].item<float>() : 0.0f;
    INFO("row " << row << ": the reference's top-" << kernel.top_k << " probability " << last << ", next " << next);
    CHECK(last - next <= 0.01f * last);
  }
  return differing;
}

TEST_CASE("moe operator: the kernel on packed experts matches the composite, every weight kind, batch and path",
          "[unit][moe]") {
  at::manual_seed(17);
  constexpr int64_t kHidden = 96, kWidth = 64, kExperts = 6;
  int rows_compared = 0, rows_routed_apart = 0;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const ExpertWeights kind : {ExpertWeights::kPlain, ExpertWeights::kInt8, ExpertWeights::kInt4,
                                     ExpertWeights::kInt4ZeroPoints, ExpertWeights::kMxfp4}) {
      const Experts experts = MakeExperts(kExperts, kHidden, kWidth, dtype, kind);
      for (const Router router_kind : {Router::kRandom, Router::kAllTied, Router::kOneExpertTakesAll}) {
        at::Tensor router = Random({kExperts, kHidden}, dtype, 1.0);
        if (router_kind == Router::kAllTied) router = at::zeros_like(router);
        if (router_kind == Router::kOneExpertTakesAll) router[4] += 50.0;  // rows are positive below
        const at::Tensor packed_router = PackWeight(router);
        for (const int64_t rows : {1, 3, 17, 33}) {
          for (const int64_t top_k : {1, 2, 3}) {
            INFO(c10::toString(dtype) << ", " << Name(kind) << " experts, router " << static_cast<int>(router_kind)
                                      << ", " << rows << " rows, top " << top_k);
            at::Tensor hidden = Random({rows, kHidden}, dtype, 1.0);
            if (router_kind == Router::kOneExpertTakesAll) hidden = hidden.abs() + 0.1;
            const at::Tensor norm = Random({kHidden}, dtype, 0.2) + 1.0;
            const bool normalize = top_k != 2;
            const ExpertChoices reference = ReferenceChoices(hidden, norm, router, top_k, normalize);
            const at::Tensor x = hidden.to(at::kFloat);
            const at::Tensor probabilities = at::softmax(
                at::linear((x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * norm.to(at::kFloat)).to(dtype), router)
                    .to(at::kFloat),
                1);
            for (const bool one_job : {true, false})
              testing::ForEachCpuKernelPath([&] {
                INFO((one_job ? "experts in one job" : "two jobs per expert"));
                SetExpertsInOneJob(one_job);
                TakeActiveExpertCount();
                const at::Tensor actual = MoeRmsNormSwiglu(hidden, norm, 1e-6, packed_router, experts.packed_gate_up,
                                                           experts.packed_gate_up_scales, experts.packed_down,
                                                           experts.packed_down_scales, top_k, normalize, kWidth);
                const int64_t active = TakeActiveExpertCount();
                const ExpertChoices& chosen = LastExpertChoices();
                CHECK(active >= top_k);
                CHECK(active <= std::min<int64_t>(kExperts, rows * top_k));
                // All tied: experts 0 .. top_k - 1 for every row.
                if (router_kind == Router::kAllTied) CHECK(active == top_k);
                if (router_kind == Router::kOneExpertTakesAll) CHECK(chosen.experts[0] == 4);
                rows_routed_apart += CheckChoices(chosen, reference, probabilities);
                rows_compared += static_cast<int>(rows);
                // The mixture of the experts the kernel chose, computed by the composite on the unpacked weights.
                const at::Tensor expected = composite::MoeWithChoices(
                    hidden, norm, 1e-6, chosen, experts.gate_up, experts.gate_up_scales, experts.down,
                    experts.down_scales, SoftmaxTopKVariant(top_k, normalize, kWidth));
                // float32 MXFP4 multiplies dequantized panels: exact, as plain weights.
                const bool exact = kind == ExpertWeights::kPlain || kind == ExpertWeights::kMxfp4;
                const double tolerance = dtype == at::kFloat ? (exact ? 1e-5 : 2e-3) : 3e-2;
                CHECK(RelativeError(actual - hidden, expected - hidden) < tolerance);
                SetExpertsInOneJob(true);
              });
          }
        }
      }
    }
  }
  WARN(rows_routed_apart << " of " << rows_compared << " rows routed apart from the reference (near-ties)");
  CHECK(rows_routed_apart * 100 <= rows_compared);
  // The composite routes as the reference does.
  const at::Tensor hidden = Random({9, 32}, at::kFloat, 1.0), norm = at::ones({32});
  const at::Tensor router = Random({4, 32}, at::kFloat, 1.0);
  const Experts experts = MakeExperts(4, 32, 32, at::kFloat, ExpertWeights::kPlain);
  const at::Tensor composite =
      composite::MoeRmsNormSwiglu(hidden, norm, 1e-6, router, experts.gate_up, experts.gate_up_scales, experts.down,
                                  experts.down_scales, 2, true, 32);
  const at::Tensor with_choices = composite::MoeWithChoices(
      hidden, norm, 1e-6, ReferenceChoices(hidden, norm, router, 2, true), experts.gate_up, experts.gate_up_scales,
      experts.down, experts.down_scales, SoftmaxTopKVariant(2, true, 32));
  CHECK(at::equal(composite, with_choices));
}

TEST_CASE("moe operator: one expert taking every row and every expert chosen in one batch", "[unit][moe]") {
  at::manual_seed(5);
  constexpr int64_t kHidden = 64, kWidth = 32, kExperts = 4;
  const Experts experts = MakeExperts(kExperts, kHidden, kWidth, at::kFloat, ExpertWeights::kPlain);
  const at::Tensor norm = at::ones({kHidden});
  const at::Tensor hidden = Random({8, kHidden}, at::kFloat, 1.0).abs() + 0.1;
  at::Tensor router = at::zeros({kExperts, kHidden});
  router[2] += 10.0;  // every row's logits favour expert 2
  TakeActiveExpertCount();
  const at::Tensor one =
      MoeRmsNormSwiglu(hidden, norm, 1e-6, PackWeight(router), experts.packed_gate_up, experts.packed_gate_up_scales,
                       experts.packed_down, experts.packed_down_scales, 1, true, kWidth);
  CHECK(TakeActiveExpertCount() == 1);
  // Top-1 renormalized: each row is expert 2's SwiGLU of its normalized self.
  const at::Tensor x = hidden * at::rsqrt(hidden.pow(2).mean(-1, true) + 1e-6);
  const at::Tensor gate_up = at::linear(x, experts.gate_up[2]);
  const at::Tensor want =
      at::linear(at::silu(gate_up.narrow(1, 0, kWidth)) * gate_up.narrow(1, kWidth, kWidth), experts.down[2]);
  CHECK(RelativeError(one - hidden, want) < 1e-5);
  // Top-4 of 4: every expert receives every row.
  const at::Tensor all = MoeRmsNormSwiglu(hidden, norm, 1e-6, PackWeight(Random({kExperts, kHidden}, at::kFloat, 1.0)),
                                          experts.packed_gate_up, experts.packed_gate_up_scales, experts.packed_down,
                                          experts.packed_down_scales, 4, false, kWidth);
  CHECK(TakeActiveExpertCount() == 4);
  CHECK(all.sizes() == hidden.sizes());
}

// A team of two members (the tests' libtorch default is one thread here), experts large enough that both claim
// panels of several experts: the members' share of the one job, and every entry summed once.
TEST_CASE("moe operator: a team of two runs the experts as one, bfloat16, int4 and MXFP4", "[unit][moe]") {
  const testing::ScopedTeamSize team(2);
  at::manual_seed(23);
  constexpr int64_t kHidden = 256, kWidth = 256, kExperts = 16;
  for (const ExpertWeights kind : {ExpertWeights::kPlain, ExpertWeights::kInt4, ExpertWeights::kMxfp4}) {
    const Experts experts = MakeExperts(kExperts, kHidden, kWidth, at::kBFloat16, kind);
    const at::Tensor router = Random({kExperts, kHidden}, at::kBFloat16, 1.0);
    const at::Tensor norm = Random({kHidden}, at::kBFloat16, 0.2) + 1.0;
    for (const int64_t rows : {1, 8, 33}) {
      INFO(Name(kind) << " experts, " << rows << " rows");
      const at::Tensor hidden = Random({rows, kHidden}, at::kBFloat16, 1.0);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const at::Tensor actual = MoeRmsNormSwiglu(hidden, norm, 1e-6, PackWeight(router), experts.packed_gate_up,
                                                   experts.packed_gate_up_scales, experts.packed_down,
                                                   experts.packed_down_scales, 4, true, kWidth);
        const at::Tensor expected =
            composite::MoeWithChoices(hidden, norm, 1e-6, LastExpertChoices(), experts.gate_up, experts.gate_up_scales,
                                      experts.down, experts.down_scales, SoftmaxTopKVariant(4, true, kWidth));
        CHECK(RelativeError(actual - hidden, expected - hidden) < 3e-2);
      }
    }
  }
}

TEST_CASE("moe routing: GPT-OSS chooses by the logits and softmaxes the chosen ones", "[unit][moe]") {
  const at::Tensor logits = at::tensor({0.5f, 3.0f, 1.0f, 3.0f}).reshape({1, 4});
  const ExpertChoices choices = ChooseExperts(logits, 2, /*normalize_top_k=*/false, /*softmax_after_top_k=*/true);
  CHECK(choices.experts == std::vector<int32_t>{1, 3});  // tied: the lower first
  CHECK(choices.weights == std::vector<float>{0.5f, 0.5f});
  const ExpertChoices three = ChooseExperts(logits, 3, false, true);
  const at::Tensor want = at::softmax(at::tensor({3.0f, 3.0f, 1.0f}), 0);
  CHECK(three.weights[2] == Approx(want[2].item<float>()));
}

// GPT-OSS's experts: the router's bias, top-k then softmax, the experts' biases and the clamped SwiGLU, on the
// kernels (experts in one job and two jobs each) against the composite on the kernel's choices, and the composite's
// own routing against the reference's.
TEST_CASE("moe operator: GPT-OSS's clamped SwiGLU experts with biases match the composite", "[unit][moe]") {
  at::manual_seed(31);
  constexpr int64_t kHidden = 64, kWidth = 32, kExperts = 8;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const ExpertWeights kind :
         {ExpertWeights::kPlain, ExpertWeights::kInt8, ExpertWeights::kInt4, ExpertWeights::kMxfp4}) {
      const Experts experts = MakeExperts(kExperts, kHidden, kWidth, dtype, kind);
      std::vector<at::Tensor> gate_up_biases, down_biases;
      for (int64_t e = 0; e < kExperts; ++e) {
        gate_up_biases.push_back(Random({2 * kWidth}, dtype, 3.0));  // large enough for the clamps to act
        down_biases.push_back(Random({kHidden}, dtype, 0.5));
      }
      const at::Tensor router = Random({kExperts, kHidden}, dtype, 1.0), router_bias = Random({kExperts}, dtype, 1.0);
      const at::Tensor norm = Random({kHidden}, dtype, 0.2) + 1.0;
      const MoeVariant variant = ClampedSwigluVariant(router_bias, gate_up_biases, down_biases, 4, kWidth, 1.702, 7.0);
      for (const int64_t rows : {1, 5, 20}) {
        const at::Tensor hidden = Random({rows, kHidden}, dtype, 1.0);
        for (const bool one_job : {true, false}) {
          INFO(c10::toString(dtype) << ", " << Name(kind) << ", " << rows << " rows, one job " << one_job);
          SetExpertsInOneJob(one_job);
          const at::Tensor actual =
              MoeRmsNormClampedSwiglu(hidden, norm, 1e-5, PackWeight(router), router_bias, experts.packed_gate_up,
                                      experts.packed_gate_up_scales, gate_up_biases, experts.packed_down,
                                      experts.packed_down_scales, down_biases, 4, kWidth, 1.702, 7.0);
          SetExpertsInOneJob(true);
          const at::Tensor expected =
              composite::MoeWithChoices(hidden, norm, 1e-5, LastExpertChoices(), experts.gate_up,
                                        experts.gate_up_scales, experts.down, experts.down_scales, variant);
          const bool exact = kind == ExpertWeights::kPlain || kind == ExpertWeights::kMxfp4;
          const double tolerance = dtype == at::kFloat ? (exact ? 1e-5 : 2e-3) : 3e-2;
          CHECK(RelativeError(actual - hidden, expected - hidden) < tolerance);
        }
      }
    }
  }
  // The composite routes by the reference's rule: its output equals the mixture of the reference's choices.
  const Experts experts = MakeExperts(4, 32, 32, at::kFloat, ExpertWeights::kPlain);
  std::vector<at::Tensor> gate_up_biases(4, at::zeros({64})), down_biases(4, at::zeros({32}));
  const at::Tensor hidden = Random({6, 32}, at::kFloat, 1.0), norm = at::ones({32});
  const at::Tensor router = Random({4, 32}, at::kFloat, 1.0), router_bias = Random({4}, at::kFloat, 1.0);
  const MoeVariant variant = ClampedSwigluVariant(router_bias, gate_up_biases, down_biases, 2, 32, 1.702, 7.0);
  const at::Tensor x = hidden * at::rsqrt(hidden.pow(2).mean(-1, true) + 1e-5);
  const ExpertChoices reference = ChooseExperts(at::linear(x, router, router_bias).contiguous(), 2, false, true);
  CHECK(at::allclose(composite::MoeRmsNormClampedSwiglu(hidden, norm, 1e-5, router, router_bias, experts.gate_up,
                                                        experts.gate_up_scales, gate_up_biases, experts.down,
                                                        experts.down_scales, down_biases, 2, 32, 1.702, 7.0),
                     composite::MoeWithChoices(hidden, norm, 1e-5, reference, experts.gate_up, experts.gate_up_scales,
                                               experts.down, experts.down_scales, variant)));
}

TEST_CASE("moe operator: bad arguments are refused by name", "[unit][moe]") {
  const Experts experts = MakeExperts(2, 32, 32, at::kFloat, ExpertWeights::kPlain);
  const at::Tensor hidden = Random({2, 32}, at::kFloat, 1.0), norm = at::ones({32});
  const at::Tensor router = PackWeight(Random({2, 32}, at::kFloat, 1.0));
  CHECK_THROWS_WITH(MoeRmsNormSwiglu(hidden, norm, 1e-6, router, experts.packed_gate_up, experts.packed_gate_up_scales,
                                     experts.packed_down, experts.packed_down_scales, 3, true, 32),
                    Catch::Contains("top_k"));
  CHECK_THROWS_WITH(
      MoeRmsNormSwiglu(hidden, norm, 1e-6, Random({3, 32}, at::kFloat, 1.0), experts.packed_gate_up,
                       experts.packed_gate_up_scales, experts.packed_down, experts.packed_down_scales, 1, true, 32),
      Catch::Contains("router"));
  std::vector<at::Tensor> mixed = experts.packed_gate_up;
  mixed[1] = experts.gate_up[1];
  CHECK_THROWS_WITH(MoeRmsNormSwiglu(hidden, norm, 1e-6, router, mixed, experts.packed_gate_up_scales,
                                     experts.packed_down, experts.packed_down_scales, 1, true, 32),
                    Catch::Contains("packed"));
}

}  // namespace
}  // namespace llmc::model::cpu
