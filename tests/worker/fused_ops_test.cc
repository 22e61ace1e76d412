// The fused CPU operators (worker/model/cpu/) on packed weights against their composite ATen versions on the
// same weights unpacked, on every instruction-set path this machine has, forced one by one. Paged attention
// is checked the same way in paged_attention_test.cc.
#include "worker/model/cpu/fused_ops.h"

#include <c10/util/BFloat16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/tensor_checks.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/logit_masks.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

using testing::Random;
using testing::RelativeError;

// The weight_scale of a weight in the activations' dtype.
at::Tensor NoScale() { return at::empty({0}, at::kFloat); }

double Tolerance(at::ScalarType dtype) { return dtype == at::kFloat ? 1e-4 : 3e-2; }

const std::vector<int64_t> kRows = {1, 2, 5, 16, 17, 32, 33};

TEST_CASE("cpu kernels: a path above the CPU's is refused, names parse", "[unit][kernels]") {
  CpuIsa isa;
  CHECK(ParseCpuIsa("avx2", &isa).ok());
  CHECK(isa == CpuIsa::kAvx2);
  CHECK(ParseCpuIsa("avx512_vnni", &isa).ok());
  CHECK(isa == CpuIsa::kAvx512Vnni);
  CHECK(std::string(CpuIsaName(CpuIsa::kAvx512Vnni)) == "avx512_vnni");
  CHECK_FALSE(ParseCpuIsa("sse9", &isa).ok());
  if (DetectedCpuIsa() != CpuIsa::kAmx) CHECK_FALSE(ForceCpuIsa(CpuIsa::kAmx).ok());
  CHECK(ForceCpuIsa(CpuIsa::kPortable).ok());
  CHECK(ActiveCpuIsa() == CpuIsa::kPortable);
  ResetCpuIsa();
  CHECK(DescribeCpu().find(CpuIsaName(ActiveCpuIsa())) != std::string::npos);
}

TEST_CASE("cpu kernels: the 4-bit weight prefetch is the vendor's unless forced, names parse", "[unit][kernels]") {
  WeightPrefetch prefetch;
  CHECK(ParseWeightPrefetch("l2", &prefetch).ok());
  CHECK(prefetch == WeightPrefetch::kToL2);
  CHECK(ParseWeightPrefetch("l1", &prefetch).ok());
  CHECK(prefetch == WeightPrefetch::kToL1);
  CHECK_FALSE(ParseWeightPrefetch("l3", &prefetch).ok());
  // Intel parts prefetch into L2, the others into L1 (cpu_isa.h).
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("vendor_id", 0) != 0) {
  }
  INFO(line);
  const bool intel = line.find("GenuineIntel") != std::string::npos;
  CHECK(VendorWeightPrefetch() == (intel ? WeightPrefetch::kToL2 : WeightPrefetch::kToL1));
  ForceWeightPrefetch(intel ? WeightPrefetch::kToL1 : WeightPrefetch::kToL2);
  CHECK(ActiveWeightPrefetch() != VendorWeightPrefetch());
  ResetWeightPrefetch();
  if (std::getenv("LLMC_WEIGHT_PREFETCH") == nullptr) CHECK(ActiveWeightPrefetch() == VendorWeightPrefetch());
  CHECK(DescribeCpu().find(absl::StrCat("prefetched into ", WeightPrefetchName(ActiveWeightPrefetch()))) !=
        std::string::npos);
}

TEST_CASE("cpu kernels: a wrong kernel environment variable is named, with what is used instead", "[unit][kernels]") {
  // This process's own environment, restored at the end (the variables are read afresh on every call).
  struct Restore {
    std::string isa = std::getenv("LLMC_CPU_ISA") ? std::getenv("LLMC_CPU_ISA") : "";
    std::string prefetch = std::getenv("LLMC_WEIGHT_PREFETCH") ? std::getenv("LLMC_WEIGHT_PREFETCH") : "";
    ~Restore() {
      setenv("LLMC_CPU_ISA", isa.c_str(), 1);
      setenv("LLMC_WEIGHT_PREFETCH", prefetch.c_str(), 1);
    }
  } restore;
  setenv("LLMC_CPU_ISA", "", 1);
  setenv("LLMC_WEIGHT_PREFETCH", "", 1);
  CHECK(KernelEnvironmentProblems().empty());
  setenv("LLMC_CPU_ISA", "portable", 1);
  setenv("LLMC_WEIGHT_PREFETCH", "l2", 1);
  CHECK(KernelEnvironmentProblems().empty());
  setenv("LLMC_CPU_ISA", "sse9", 1);
  setenv("LLMC_WEIGHT_PREFETCH", "l3", 1);
  const std::vector<std::string> problems = KernelEnvironmentProblems();
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find("LLMC_CPU_ISA") != std::string::npos);
  CHECK(problems[0].find("sse9") != std::string::npos);
  CHECK(problems[0].find(absl::StrCat("using ", CpuIsaName(ActiveCpuIsa()))) != std::string::npos);
  CHECK(problems[1].find("LLMC_WEIGHT_PREFETCH") != std::string::npos);
  CHECK(problems[1].find("'l3'") != std::string::npos);
  if (DetectedCpuIsa() != CpuIsa::kAmx) {
    setenv("LLMC_CPU_ISA", "amx", 1);
    setenv("LLMC_WEIGHT_PREFETCH", "", 1);
    REQUIRE(KernelEnvironmentProblems().size() == 1);
    CHECK(KernelEnvironmentProblems()[0].find("not available here") != std::string::npos);
  }
}

// The epilogues' bfloat16 stores (vector_math.h: RoundRowToBf16, AddRowToBf16) give c10::BFloat16's bits for
// every value: halfway cases, subnormals, infinities, NaNs (0x7FC0) and signed zeros among random bit patterns.
TEST_CASE("cpu kernels: bfloat16 row stores round as c10::BFloat16 rounds, on every path this CPU has",
          "[unit][kernels]") {
  std::vector<float> values;
  for (const uint32_t bits :
       {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x00008000u, 0x00018000u, 0x007fffffu,
        0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fffffffu}) {
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    values.push_back(value);
  }
  std::mt19937 random(11);
  while (values.size() < 4099) {  // an odd count: each path's tail too
    const uint32_t bits = static_cast<uint32_t>(random());
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    values.push_back(value);
  }
  std::vector<uint16_t> residual(values.size());
  for (size_t i = 0; i < values.size(); ++i) residual[i] = c10::BFloat16(values[(i * 7) % values.size()]).x;
  std::vector<uint16_t> want_round(values.size()), want_add(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    want_round[i] = c10::BFloat16(values[i]).x;
    want_add[i] =
        c10::BFloat16(static_cast<float>(c10::BFloat16(residual[i], c10::BFloat16::from_bits())) + values[i]).x;
  }
  using Round = void (*)(const float*, uint16_t*, int64_t);
  using Add = void (*)(const uint16_t*, const float*, uint16_t*, int64_t);
  std::vector<std::tuple<CpuIsa, Round, Add>> paths = {
      {CpuIsa::kPortable, &RoundRowToBf16Portable, &AddRowToBf16Portable}};
#ifdef LLMC_CPU_X86_KERNELS
  paths.emplace_back(CpuIsa::kAvx2, &RoundRowToBf16Avx2, &AddRowToBf16Avx2);
  paths.emplace_back(CpuIsa::kAvx512Bf16, &RoundRowToBf16Avx512, &AddRowToBf16Avx512);
#endif
  for (const auto& [isa, round, add] : paths) {
    if (DetectedCpuIsa() < isa) continue;
    INFO(CpuIsaName(isa));
    std::vector<uint16_t> rounded(values.size()), added(values.size());
    round(values.data(), rounded.data(), static_cast<int64_t>(values.size()));
    add(residual.data(), values.data(), added.data(), static_cast<int64_t>(values.size()));
    size_t round_mismatches = 0, add_mismatches = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      round_mismatches += rounded[i] != want_round[i];
      add_mismatches += added[i] != want_add[i];
    }
    CHECK(round_mismatches == 0);
    CHECK(add_mismatches == 0);
  }
}

TEST_CASE("cpu kernels: linear_residual matches at::linear + residual", "[unit][kernels]") {
  at::manual_seed(1);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t k : {40, 128, 200}) {
      const int64_t n = 70;
      const at::Tensor weight = Random({n, k}, dtype, 0.1);
      const at::Tensor packed = PackWeight(weight);
      for (const int64_t m : kRows) {
        const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
        const at::Tensor expected =
            composite::LinearResidual(input.to(at::kFloat), weight.to(at::kFloat), NoScale(), residual.to(at::kFloat));
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " m " << m << " k " << k);
          CHECK(RelativeError(LinearResidual(input, packed, NoScale(), residual), expected) < Tolerance(dtype));
        });
      }
    }
  }
}

TEST_CASE("cpu kernels: linear_residual takes the attention's [tokens, heads, head_dim] as [tokens, heads * head_dim]",
          "[unit][kernels]") {
  at::manual_seed(2);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t heads = 4, head_dim = 32, n = 70;
    const at::Tensor weight = Random({n, heads * head_dim}, dtype, 0.1);
    const at::Tensor packed = PackWeight(weight);
    for (const int64_t m : kRows) {
      INFO("dtype " << dtype << " m " << m);
      const at::Tensor attention = Random({m, heads, head_dim}, dtype), residual = Random({m, n}, dtype);
      const at::Tensor flat = attention.reshape({m, heads * head_dim});
      CHECK(at::equal(LinearResidual(attention, packed, NoScale(), residual),
                      LinearResidual(flat, packed, NoScale(), residual)));
      // Unpacked weights (the composite path) too.
      CHECK(at::equal(LinearResidual(attention, weight, NoScale(), residual),
                      LinearResidual(flat, weight, NoScale(), residual)));
    }
    // Any other rank is refused.
    CHECK_THROWS(LinearResidual(Random({2, 2, heads, head_dim}, dtype), packed, NoScale(), Random({2, n}, dtype)));
  }
}

TEST_CASE("cpu kernels: linear_residual with a bias (GPT-OSS's o_proj) matches at::linear with bias + residual",
          "[unit][kernels]") {
  at::manual_seed(3);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t n = 70, k = 128;
    const at::Tensor weight = Random({n, k}, dtype, 0.1), bias = Random({n}, dtype);
    const at::Tensor packed = PackWeight(weight);
    for (const int64_t m : kRows) {
      const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
      const at::Tensor expected =
          at::linear(input.to(at::kFloat), weight.to(at::kFloat), bias.to(at::kFloat)) + residual.to(at::kFloat);
      CHECK(RelativeError(composite::LinearResidual(input.to(at::kFloat), weight.to(at::kFloat), NoScale(),
                                                    residual.to(at::kFloat), c10::nullopt, 1e-6, bias.to(at::kFloat)),
                          expected) < 1e-6);
      testing::ForEachCpuKernelPath([&] {
        INFO("dtype " << dtype << " m " << m);
        CHECK(RelativeError(LinearResidual(input, packed, NoScale(), residual, c10::nullopt, 1e-6, bias), expected) <
              Tolerance(dtype));
      });
    }
  }
}

TEST_CASE("cpu kernels: linear_residual with an output norm (Gemma 3) matches residual + RMSNorm(at::linear)",
          "[unit][kernels]") {
  at::manual_seed(11);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const int64_t n : {24, 70, 200}) {
      const int64_t k = 72;
      const at::Tensor weight = Random({n, k}, dtype, 0.1);
      const at::Tensor packed = PackWeight(weight);
      const at::Tensor norm = Random({n}, dtype) + 1.0;
      for (const int64_t m : kRows) {
        const at::Tensor input = Random({m, k}, dtype), residual = Random({m, n}, dtype);
        const at::Tensor expected = composite::LinearResidual(input.to(at::kFloat), weight.to(at::kFloat), NoScale(),
                                                              residual.to(at::kFloat), norm.to(at::kFloat), 1e-6);
        // The norm changes the answer: without it the result is another one.
        CHECK(RelativeError(composite::LinearResidual(input.to(at::kFloat), weight.to(at::kFloat), NoScale(),
                                                      residual.to(at::kFloat)),
                            expected) > 0.05);
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " m " << m << " n " << n);
          CHECK(RelativeError(LinearResidual(input, packed, NoScale(), residual, norm, 1e-6), expected) <
                Tolerance(dtype));
        });
      }
    }
  }
}

TEST_CASE("cpu kernels: rms_norm_gate_up_gelu_tanh matches at::gelu(tanh) * up", "[unit][kernels]") {
  at::manual_seed(12);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t k = 72;
    const at::Tensor norm = Random({k}, dtype);
    for (const std::pair<int64_t, double>& shape : {std::pair<int64_t, double>{40, 0.2}, {96, 0.2}, {96, 3.0}}) {
      const int64_t intermediate = shape.first;
      const double scale = shape.second;
      // Large gate values too (scale 3): GELU's tails (x and 0) must come out, not inf or NaN.
      const at::Tensor weight = Random({2 * intermediate, k}, dtype, scale);
      const at::Tensor packed = PackWeight(weight, GateUpColumnOrder(intermediate));
      for (const int64_t m : kRows) {
        const at::Tensor hidden = Random({m, k}, dtype);
        const at::Tensor expected = composite::RmsNormGateUpGeluTanh(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6,
                                                                     weight.to(at::kFloat), NoScale(), intermediate);
        REQUIRE(at::isfinite(expected).all().item<bool>());
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " m " << m << " intermediate " << intermediate);
          const at::Tensor out = RmsNormGateUpGeluTanh(hidden, norm, 1e-6, packed, NoScale(), intermediate);
          CHECK(RelativeError(out, expected) < Tolerance(dtype));
        });
      }
    }
  }
}

TEST_CASE("cpu kernels: rms_norm_gate_up_silu and rms_norm_lm_head match their compositions", "[unit][kernels]") {
  at::manual_seed(2);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t k = 72;
    const at::Tensor norm = Random({k}, dtype);
    for (const int64_t intermediate : {40, 96}) {
      const at::Tensor weight = Random({2 * intermediate, k}, dtype, 0.2);
      const at::Tensor packed = PackWeight(weight, GateUpColumnOrder(intermediate));
      for (const int64_t m : kRows) {
        const at::Tensor hidden = Random({m, k}, dtype);
        const at::Tensor expected = composite::RmsNormGateUpSilu(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6,
                                                                 weight.to(at::kFloat), NoScale(), intermediate);
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " m " << m << " intermediate " << intermediate);
          CHECK(RelativeError(RmsNormGateUpSilu(hidden, norm, 1e-6, packed, NoScale(), intermediate), expected) <
                Tolerance(dtype));
        });
      }
    }
    const int64_t vocab = 130;
    const at::Tensor head = Random({vocab, k}, dtype, 0.2);
    const at::Tensor packed_head = PackWeight(head);
    for (const int64_t m : kRows) {
      const at::Tensor hidden = Random({m, k}, dtype);
      const at::Tensor expected = composite::RmsNormLmHead(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6,
                                                           head.to(at::kFloat), NoScale(), vocab);
      testing::ForEachCpuKernelPath([&] {
        const at::Tensor logits = RmsNormLmHead(hidden, norm, 1e-6, packed_head, NoScale(), vocab);
        CHECK(logits.scalar_type() == at::kFloat);
        CHECK(RelativeError(logits, expected) < Tolerance(dtype));
      });
    }
    // The embedding reads a tied, packed head back exactly.
    const at::Tensor ids = at::tensor(std::vector<int64_t>{0, 129, 64, 63, 7}, at::kLong);
    CHECK(Embed(ids, packed_head, NoScale(), k).equal(composite::Embed(ids, head, NoScale(), k)));
  }
}

TEST_CASE("cpu kernels: rms_norm_qkv_rope matches, writes the cache slots, GQA 1/2/7, positions past 4k, QK-norm",
          "[unit][kernels]") {
  at::manual_seed(3);
  struct Heads {
    int64_t heads, kv_heads, head_dim;
  };
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const Heads shape : {Heads{2, 2, 64}, Heads{4, 2, 32}, Heads{7, 1, 64}}) {
      const int64_t k = 56, blocks = 12, block_size = 16;
      const int64_t width = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
      const at::Tensor weight = Random({width, k}, dtype, 0.2), bias = Random({width}, dtype, 0.1);
      const at::Tensor norm = Random({k}, dtype);
      const at::Tensor packed = PackWeight(weight);
      // Qwen3's per-head norms of q and k, or none (empty operands; the other tests leave them out).
      const at::Tensor q_norm = Random({shape.head_dim}, dtype), k_norm = Random({shape.head_dim}, dtype);
      for (const int64_t m : {1, 5, 17, 33}) {
        const bool qk_norm = m != 5;
        const c10::optional<at::Tensor> q_norm_in = qk_norm ? q_norm : at::empty({0}, dtype);
        const c10::optional<at::Tensor> k_norm_in = qk_norm ? k_norm : at::empty({0}, dtype);
        const auto to_float = [](const c10::optional<at::Tensor>& t) {
          return t.has_value() ? c10::optional<at::Tensor>(t->to(at::kFloat)) : c10::nullopt;
        };
        const at::Tensor hidden = Random({m, k}, dtype);
        const at::Tensor positions = at::randint(0, 6000, {m}, at::kLong);
        const at::Tensor inv_freq =
            at::pow(10000.0, -at::arange(0, shape.head_dim, 2, at::kFloat) / static_cast<double>(shape.head_dim));
        const at::Tensor freqs = positions.to(at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);
        const at::Tensor cos = freqs.cos(), sin = freqs.sin();
        const at::Tensor slots = at::randperm(blocks * block_size, at::kLong).narrow(0, 0, m);
        const auto make_cache = [&] { return at::zeros({blocks, block_size, shape.kv_heads, shape.head_dim}, dtype); };
        at::Tensor expected_keys = make_cache().to(at::kFloat), expected_values = make_cache().to(at::kFloat);
        const at::Tensor expected_q =
            composite::RmsNormQkvRope(hidden.to(at::kFloat), norm.to(at::kFloat), 1e-6, weight.to(at::kFloat),
                                      NoScale(), bias.to(at::kFloat), cos, sin, expected_keys, expected_values, slots,
                                      shape.heads, shape.kv_heads, to_float(q_norm_in), to_float(k_norm_in));
        testing::ForEachCpuKernelPath([&] {
          INFO("dtype " << dtype << " m " << m << " heads " << shape.heads << "/" << shape.kv_heads << " qk_norm "
                        << qk_norm);
          at::Tensor keys = make_cache(), values = make_cache();
          const at::Tensor q = RmsNormQkvRope(hidden, norm, 1e-6, packed, NoScale(), bias, cos, sin, keys, values,
                                              slots, shape.heads, shape.kv_heads, q_norm_in, k_norm_in);
          CHECK(RelativeError(q, expected_q) < Tolerance(dtype));
          CHECK(RelativeError(keys, expected_keys) < Tolerance(dtype));
          CHECK(RelativeError(values, expected_values) < Tolerance(dtype));
        });
      }
    }
  }
}

TEST_CASE("cpu kernels: rms_norm_lm_head_top_k keeps each row's largest logits, ties by lower id", "[unit][kernels]") {
  at::manual_seed(3);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t k = 72;
    const at::Tensor norm = Random({k}, dtype);
    for (const int64_t vocab : {130, 1000}) {
      at::Tensor head = Random({vocab, k}, dtype, 0.2);
      // Equal rows give equal logits in every batch row: the lower id must come first.
      head[vocab - 1].copy_(head[5]);
      head[70].copy_(head[5]);
      head[4].copy_(head[3]);
      const at::Tensor packed_head = PackWeight(head);
      for (const int64_t m : kRows) {
        const at::Tensor hidden = Random({m, k}, dtype);
        std::vector<int64_t> full;
        for (int64_t row = m - 1; row >= 0; row -= 3) full.push_back(row);  // a subset, not in order
        const at::Tensor full_rows = at::tensor(full, at::kLong);
        for (const int64_t top_k : {int64_t{1}, int64_t{5}, int64_t{64}}) {
          testing::ForEachCpuKernelPath([&] {
            INFO("dtype " << dtype << " vocab " << vocab << " m " << m << " top_k " << top_k);
            // Same path, same panel products: the plain LM head's logits are the exact reference.
            const at::Tensor logits = RmsNormLmHead(hidden, norm, 1e-6, packed_head, NoScale(), vocab);
            const auto [values, ids] = at::sort(logits, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
            const auto [full_logits, top_values, top_ids] =
                RmsNormLmHeadTopK(hidden, norm, 1e-6, packed_head, NoScale(), vocab, full_rows, top_k);
            CHECK(full_logits.equal(logits.index_select(0, full_rows)));
            CHECK(top_values.equal(values.narrow(1, 0, top_k)));
            CHECK(top_ids.equal(ids.narrow(1, 0, top_k)));
          });
        }
      }
      // The composite (CUDA, unpacked weights) agrees with the same definition.
      const at::Tensor hidden = Random({3, k}, dtype);
      const auto [full_logits, top_values, top_ids] =
          composite::RmsNormLmHeadTopK(hidden, norm, 1e-6, head, NoScale(), vocab, at::tensor({2, 0}, at::kLong), 8);
      const at::Tensor logits = composite::RmsNormLmHead(hidden, norm, 1e-6, head, NoScale(), vocab);
      CHECK(full_logits.equal(logits.index_select(0, at::tensor({2, 0}, at::kLong))));
      CHECK(top_ids.select(1, 0).equal(logits.argmax(1)));
      CHECK(top_values.select(1, 0).equal(std::get<0>(logits.max(1))));
    }
  }
}

TEST_CASE("cpu kernels: rms_norm_lm_head_top_k ranks a masked row's allowed tokens only", "[unit][kernels]") {
  at::manual_seed(5);
  const int64_t k = 72, vocab = 1000, m = 5;
  const at::Tensor norm = Random({k}, at::kBFloat16);
  const at::Tensor head = Random({vocab, k}, at::kBFloat16, 0.2);
  const at::Tensor packed_head = PackWeight(head);
  const at::Tensor hidden = Random({m, k}, at::kBFloat16);
  // Row 0 unmasked, row 1 a sparse mask, row 2 a dense one, row 3 a single token, row 4 nothing allowed.
  std::vector<std::vector<uint64_t>> words(m, std::vector<uint64_t>((vocab + 63) / 64, 0));
  for (int64_t id = 0; id < vocab; ++id) {
    if (id % 97 == 3) words[1][id >> 6] |= uint64_t{1} << (id & 63);
    if (id % 5 != 0) words[2][id >> 6] |= uint64_t{1} << (id & 63);
  }
  words[3][777 >> 6] |= uint64_t{1} << (777 & 63);
  const std::vector<const uint64_t*> masks = {nullptr, words[1].data(), words[2].data(), words[3].data(),
                                              words[4].data()};
  const at::Tensor full_rows = at::tensor({1, 2}, at::kLong);
  testing::ForEachCpuKernelPath([&] {
    const at::Tensor logits = RmsNormLmHead(hidden, norm, 1e-6, packed_head, NoScale(), vocab);
    at::Tensor allowed = logits.clone();
    for (int64_t row = 1; row < m; ++row) {
      for (int64_t id = 0; id < vocab; ++id) {
        if (!((words[row][id >> 6] >> (id & 63)) & 1)) allowed[row][id] = -std::numeric_limits<float>::infinity();
      }
    }
    const auto [values, ids] = at::sort(allowed, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
    const ScopedLogitMasks scope(&masks);
    const auto [full_logits, top_values, top_ids] =
        RmsNormLmHeadTopK(hidden, norm, 1e-6, packed_head, NoScale(), vocab, full_rows, 8);
    // Full rows stay raw; top lists hold allowed tokens only, best first.
    CHECK(full_logits.equal(logits.index_select(0, full_rows)));
    for (int64_t row = 0; row < 3; ++row) {
      CHECK(top_values[row].equal(values[row].narrow(0, 0, 8)));
      CHECK(top_ids[row].equal(ids[row].narrow(0, 0, 8)));
    }
    CHECK(top_ids[3][0].item<int64_t>() == 777);
    CHECK(top_values[3][0].item<float>() == logits[3][777].item<float>());
    CHECK(std::isnan(top_values[3][1].item<float>()));  // fewer allowed tokens than k: the rest is NaN
    CHECK(std::isnan(top_values[4][0].item<float>()));  // nothing allowed
  });
  // Without the scope, no mask applies.
  const auto unmasked = RmsNormLmHeadTopK(hidden, norm, 1e-6, packed_head, NoScale(), vocab, full_rows, 1);
  const at::Tensor logits = RmsNormLmHead(hidden, norm, 1e-6, packed_head, NoScale(), vocab);
  CHECK(std::get<2>(unmasked).select(1, 0).equal(logits.argmax(1)));
}

TEST_CASE("cpu kernels: rms_norm_lm_head_top_k refuses bad rows and counts", "[unit][kernels]") {
  const int64_t k = 40, vocab = 70;
  const at::Tensor norm = at::ones({k}), head = at::randn({vocab, k});
  const at::Tensor packed = PackWeight(head), hidden = at::randn({2, k});
  CHECK_THROWS(RmsNormLmHeadTopK(hidden, norm, 1e-6, packed, NoScale(), vocab, at::tensor({2}, at::kLong), 1));
  CHECK_THROWS(RmsNormLmHeadTopK(hidden, norm, 1e-6, packed, NoScale(), vocab, at::tensor({1, 1}, at::kLong), 1));
  CHECK_THROWS(RmsNormLmHeadTopK(hidden, norm, 1e-6, packed, NoScale(), vocab, at::tensor({0}, at::kLong), vocab + 1));
  const auto [full_logits, top_values, top_ids] =
      RmsNormLmHeadTopK(hidden, norm, 1e-6, packed, NoScale(), vocab, at::empty({0}, at::kLong), 0);
  CHECK(full_logits.size(0) == 0);
  CHECK(top_ids.sizes() == at::IntArrayRef({2, 0}));
}

}  // namespace
}  // namespace llmc::model::cpu
