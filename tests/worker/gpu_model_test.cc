// [gpu]: the CUDA kernels against the CPU ones, and the model scenario on CUDA. Built only when libtorch
// has CUDA (LLMC_WITH_CUDA); run on a machine with a GPU.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "tests/support/catch.h"
#include "tests/support/model_scenario.h"
#include "worker/model/paged_attention_ops.h"

namespace llmc::model {
namespace {

TEST_CASE("gpu: CUDA paged attention equals the CPU kernel", "[gpu]") {
  REQUIRE(torch::cuda::is_available());
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const auto& [heads, kv_heads, head_dim] : {std::tuple{4, 4, 64}, {14, 2, 64}, {7, 1, 128}, {8, 4, 128}}) {
      at::manual_seed(heads + head_dim);
      const auto options = at::TensorOptions().dtype(dtype);
      const at::Tensor key_cache = at::randn({32, 16, kv_heads, head_dim}, options);
      const at::Tensor value_cache = at::randn({32, 16, kv_heads, head_dim}, options);
      const at::Tensor query = at::randn({45, heads, head_dim}, options);
      const at::Tensor tables = at::randperm(32, at::kInt).reshape({4, 8});
      const at::Tensor lengths = at::tensor({40, 100, 3, 1}, at::kInt);
      const at::Tensor starts = at::tensor({0, 40, 41, 44, 45}, at::kInt);
      const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
      static auto op = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("llmc::paged_attention", "")
                           .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                             const at::Tensor&, const at::Tensor&, double, int64_t,
                                             const c10::optional<at::Tensor>&)>();
      // The whole context, and windows below a block, across blocks and past the context; GPT-OSS's sinks on the
      // last two.
      const at::Tensor sinks = at::randn({heads}) * 3.0;
      for (const int64_t window : {0, 5, 24, 200}) {
        const c10::optional<at::Tensor> sink_operand =
            window >= 24 ? c10::optional<at::Tensor>(sinks) : c10::optional<at::Tensor>();
        const at::Tensor cpu =
            PagedAttentionCpu(query, key_cache, value_cache, tables, lengths, starts, scale, window, sink_operand);
        const at::Tensor on_gpu = op.call(
            query.cuda(), key_cache.cuda(), value_cache.cuda(), tables.cuda(), lengths.cuda(), starts.cuda(), scale,
            window, sink_operand.has_value() ? c10::optional<at::Tensor>(sinks.cuda()) : c10::optional<at::Tensor>());
        const double difference = (on_gpu.cpu().to(at::kFloat) - cpu.to(at::kFloat)).abs().max().item<double>();
        INFO("dtype " << dtype << " heads " << heads << "/" << kv_heads << " dim " << head_dim << " window " << window);
        CHECK(difference < (dtype == at::kFloat ? 1e-4 : 2e-2));
      }
    }
  }
}

TEST_CASE("gpu: the model scenario on CUDA matches the reference", "[gpu]") {
  REQUIRE(torch::cuda::is_available());
  for (const std::string dtype : {"float32", "bfloat16"}) {
    const std::string dir = testing::ParityFixture(dtype);
    auto model = LoadedModel::Load(dir + "/package", {"cuda", ""});
    REQUIRE(model.ok());
    CHECK((*model)->device().is_cuda());
    testing::RunModelScenario(**model, testing::LoadModelReference(dir), dtype == "float32" ? 1e-3 : 3e-2,
                              /*teacher_forcing=*/dtype != "float32");
  }
}

// int4 weights on CUDA (Int4LinearCuda: decode rows stream the packed weights, prefill chunks dequantize slices
// for cuBLAS, the embedding dequantizes its rows) against the CPU's composite path of the same weights quantized at
// load, both in float32 arithmetic, at groups of 32 and 128. (The kernels' zero points: int4_linear_cuda_test.cc.)
TEST_CASE("gpu: int4 weights on CUDA equal the CPU composite of the same weights", "[gpu]") {
  REQUIRE(torch::cuda::is_available());
  const std::string dir = testing::ParityFixture("float32");
  const testing::ModelReference reference = testing::LoadModelReference(dir);
  for (const int64_t group_size : {32, 128}) {
    LoadOptions on_cpu{"cpu", "", "int4", group_size};
    on_cpu.pack_weights = false;
    auto cpu_model = LoadedModel::Load(dir + "/package", on_cpu);
    auto gpu_model = LoadedModel::Load(dir + "/package", {"cuda", "", "int4", group_size});
    REQUIRE(cpu_model.ok());
    REQUIRE(gpu_model.ok());
    const std::vector<at::Tensor> want = testing::ScenarioLogits(**cpu_model, reference);
    const std::vector<at::Tensor> got = testing::ScenarioLogits(**gpu_model, reference);
    REQUIRE(got.size() == want.size());
    double largest = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      largest = std::max(largest, (got[i] - want[i]).abs().max().item<double>());
      scale = std::max(scale, want[i].abs().max().item<double>());
    }
    INFO("group " << group_size << ": largest difference " << largest << " of logits up to " << scale);
    CHECK(scale > 0);
    CHECK(largest < 1e-3 * std::max(1.0, scale));
  }
}

}  // namespace
}  // namespace llmc::model
