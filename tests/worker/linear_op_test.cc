// llmc::linear's CPU kernel against at::linear and a float64 reference: the streaming fast path on CPUs
// with AVX512 (BF16), and the fallback everywhere.
#include <ATen/core/dispatch/Dispatcher.h>

#include <catch2/catch.hpp>
#include <string>

#include "worker/model/linear_ops.h"

namespace llmc::model {
namespace {

// Reference in float64 from the very values the kernel sees, rounded like the kernel's output.
at::Tensor Reference(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  const c10::optional<at::Tensor> bias64 =
      bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kDouble)) : c10::nullopt;
  return at::linear(input.to(at::kDouble), weight.to(at::kDouble), bias64);
}

void CheckClose(const at::Tensor& actual, const at::Tensor& expected, at::ScalarType dtype, const std::string& what) {
  INFO(what);
  REQUIRE(actual.sizes() == expected.sizes());
  REQUIRE(actual.scalar_type() == dtype);
  // bfloat16 keeps 8 significant bits: one rounding of the float32 sum is up to 2^-8 relative.
  const double rtol = dtype == at::kBFloat16 ? 8e-3 : 1e-5, atol = dtype == at::kBFloat16 ? 1e-2 : 1e-4;
  const at::Tensor error = (actual.to(at::kDouble) - expected).abs() - rtol * expected.abs();
  INFO("worst excess error " << error.max().item<double>());
  CHECK(error.max().item<double>() <= atol);
}

bool CpuHasFastPath(at::ScalarType dtype) {
#if defined(__x86_64__)
  if (dtype == at::kBFloat16) return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

TEST_CASE("llmc::linear matches at::linear for few and many rows, odd sizes, with and without bias", "[unit][linear]") {
  at::manual_seed(3);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    const int64_t max_fast_rows = LinearCpuMaxFastRows(dtype);
    CHECK((max_fast_rows > 0) == CpuHasFastPath(dtype));
    for (const auto& [k, n] :
         {std::pair<int64_t, int64_t>{1, 1}, {31, 7}, {64, 33}, {100, 17}, {896, 129}, {1000, 1001}, {4864, 40}}) {
      const at::Tensor weight = at::randn({n, k}).to(dtype);
      const at::Tensor bias = at::randn({n}).to(dtype);
      for (int64_t rows = 1; rows <= 9; ++rows) {
        const at::Tensor input = at::randn({rows, k}).to(dtype);
        for (const bool with_bias : {false, true}) {
          const c10::optional<at::Tensor> b = with_bias ? c10::optional<at::Tensor>(bias) : c10::nullopt;
          const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " k " +
                                   std::to_string(k) + " n " + std::to_string(n) + (with_bias ? " bias" : "");
          // Several input rows take the fast path only while they fit half the L1 cache (16 KiB).
          const bool fits = rows == 1 || rows * k * input.element_size() <= 16 * 1024;
          CHECK(LinearCpuUsesFastPath(input, weight, b) == (rows <= max_fast_rows && fits));
          const at::Tensor expected = Reference(input, weight, b);
          CheckClose(LinearCpu(input, weight, b), expected, dtype, what);
          CheckClose(LinearCpu(input, weight, b, /*allow_fast_path=*/false), expected, dtype, what + " fallback");
          CHECK(at::equal(LinearCpu(input, weight, b, /*allow_fast_path=*/false), at::linear(input, weight, b)));
        }
      }
    }
  }
}

TEST_CASE("llmc::linear handles strided and batched inputs", "[unit][linear]") {
  at::manual_seed(4);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    const at::Tensor weight = at::randn({70, 96}).to(dtype);
    const at::Tensor bias = at::randn({70}).to(dtype);
    // Rows further apart than k (a slice of wider rows), elements not adjacent (every other column), and
    // a [batch, tokens, k] input.
    const at::Tensor wide = at::randn({5, 130}).to(dtype).narrow(1, 3, 96);
    const at::Tensor every_other = at::randn({3, 192}).to(dtype).slice(1, 0, 192, 2);
    const at::Tensor transposed = at::randn({96, 4}).to(dtype).t();
    const at::Tensor batched = at::randn({2, 3, 96}).to(dtype);
    for (const at::Tensor& input : {wide, every_other, transposed, batched}) {
      REQUIRE(input.size(-1) == 96);
      CHECK(LinearCpuUsesFastPath(input, weight, bias) == CpuHasFastPath(dtype));
      CheckClose(LinearCpu(input, weight, bias), Reference(input, weight, bias), dtype, "strided");
    }
    CHECK(LinearCpu(batched, weight, bias).sizes() == at::IntArrayRef({2, 3, 70}));
    CHECK(LinearCpu(batched[0][0], weight, bias).sizes() == at::IntArrayRef({70}));
  }
}

TEST_CASE("llmc::linear leaves what the fast path does not cover to at::linear", "[unit][linear]") {
  const at::Tensor input = at::randn({2, 64}).to(at::kBFloat16);
  const at::Tensor weight = at::randn({16, 64}).to(at::kBFloat16);
  CHECK_FALSE(LinearCpuUsesFastPath(input.to(at::kFloat), weight, c10::nullopt));  // mixed dtypes
  CHECK_FALSE(LinearCpuUsesFastPath(input, weight, at::randn({16})));              // float32 bias
  CHECK_FALSE(LinearCpuUsesFastPath(input.to(at::kHalf), weight.to(at::kHalf), c10::nullopt));
  const at::Tensor transposed_weight = at::randn({64, 16}).to(at::kBFloat16).t();
  CHECK_FALSE(LinearCpuUsesFastPath(input, transposed_weight, c10::nullopt));
  CHECK(at::equal(LinearCpu(input, transposed_weight, c10::nullopt), at::linear(input, transposed_weight)));
  const at::Tensor many_rows = at::randn({LinearCpuMaxFastRows(at::kBFloat16) + 1, 64}).to(at::kBFloat16);
  CHECK_FALSE(LinearCpuUsesFastPath(many_rows, weight, c10::nullopt));
  CHECK_FALSE(LinearCpuUsesFastPath(at::empty({0, 64}, at::kBFloat16), weight, c10::nullopt));
  if (LinearCpuMaxFastRows(at::kBFloat16) >= 4) {
    const at::Tensor down = at::randn({8, 4864}).to(at::kBFloat16);
    CHECK(LinearCpuUsesFastPath(at::randn({1, 4864}).to(at::kBFloat16), down, c10::nullopt));
    CHECK_FALSE(LinearCpuUsesFastPath(at::randn({2, 4864}).to(at::kBFloat16), down, c10::nullopt));
  }
  CHECK(LinearCpu(at::empty({0, 64}, at::kBFloat16), weight, c10::nullopt).sizes() == at::IntArrayRef({0, 16}));
  CHECK_THROWS(LinearCpu(at::randn({2, 63}).to(at::kBFloat16), weight, c10::nullopt));
}

TEST_CASE("llmc::linear is registered with the dispatcher and reaches the CPU kernel", "[unit][linear]") {
  EnsureLinearOpRegistered();
  const auto op = c10::Dispatcher::singleton()
                      .findSchemaOrThrow("llmc::linear", "")
                      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&)>();
  const at::Tensor input = at::randn({1, 40}).to(at::kBFloat16);
  const at::Tensor weight = at::randn({24, 40}).to(at::kBFloat16);
  const at::Tensor bias = at::randn({24}).to(at::kBFloat16);
  CHECK(at::equal(op.call(input, weight, bias), LinearCpu(input, weight, bias)));
}

}  // namespace
}  // namespace llmc::model
