// Decode attention over long contexts, the way a model's step meets it: one query row per layer, each layer's
// cache its own allocation, so with enough layers no layer's keys and values are still in the caches when its
// turn comes again. Times paged_attention with the whole context as one work item per KV head and split into
// chunks (split decoding), the settings taking turns in one process, and prints microseconds per layer and the
// cache bytes read per second. Prints figures; judges nothing.
//
//   llmc_attention_bench [--shape=qwen3|qwen2|gemma3] [--context=8192] [--layers=28] [--steps=20] [--chunks=128,1024]
//   LLMC_THREADS sets the team (default 2).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "worker/model/cpu/huge_page_arena.h"
#include "worker/model/paged_attention_ops.h"

namespace {

struct Shape {
  const char* name;
  int64_t heads, kv_heads, head_dim;
};
constexpr Shape kShapes[] = {{"qwen3", 16, 8, 128}, {"qwen2", 14, 2, 64}, {"gemma3", 4, 1, 256}};
constexpr int64_t kBlockSize = 16;

struct Layer {
  at::Tensor key_cache, value_cache;
};

double MedianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name = "qwen3";
  int64_t context = 8192, num_layers = 28, steps = 20;
  std::vector<int64_t> chunk_settings = {llmc::model::kWholeContext, 128};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* prefix, int64_t& out) {
      return arg.rfind(prefix, 0) == 0 && absl::SimpleAtoi(arg.substr(std::string(prefix).size()), &out);
    };
    if (arg.rfind("--shape=", 0) == 0) {
      shape_name = arg.substr(8);
    } else if (arg.rfind("--chunks=", 0) == 0) {
      chunk_settings = {llmc::model::kWholeContext};
      for (const auto part : absl::StrSplit(arg.substr(9), ',')) {
        int64_t chunk = 0;
        if (!absl::SimpleAtoi(part, &chunk) || chunk <= 0) return std::fprintf(stderr, "bad --chunks\n"), 2;
        chunk_settings.push_back(chunk);
      }
    } else if (!value("--context=", context) && !value("--layers=", num_layers) && !value("--steps=", steps)) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  const Shape* shape = nullptr;
  for (const Shape& s : kShapes) {
    if (shape_name == s.name) shape = &s;
  }
  if (shape == nullptr || context < 1 || num_layers < 1 || steps < 1) {
    std::fprintf(stderr, "usage: see the file's comment\n");
    return 2;
  }
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads != nullptr ? std::max(1, std::atoi(threads)) : 2);

  const int64_t blocks = (context + kBlockSize - 1) / kBlockSize;
  const auto options = at::TensorOptions().dtype(at::kBFloat16);
  at::manual_seed(1);
  std::vector<Layer> layers;
  // On transparent huge pages, as the worker's KV cache is (LoadedModel::AllocateKvCache); LLMC_SMALL_PAGES=1 for
  // the default pages.
  const bool small_pages = std::getenv("LLMC_SMALL_PAGES") != nullptr;
  const auto cache = [&] {
    const std::vector<int64_t> sizes = {blocks, kBlockSize, shape->kv_heads, shape->head_dim};
    at::Tensor tensor =
        small_pages ? at::empty(sizes, options) : llmc::model::cpu::EmptyOnHugePages(sizes, at::kBFloat16);
    return tensor.normal_();
  };
  for (int64_t l = 0; l < num_layers; ++l) layers.push_back({cache(), cache()});
  const at::Tensor query = at::randn({1, shape->heads, shape->head_dim}, options);
  const at::Tensor tables = at::arange(blocks, at::kInt).reshape({1, blocks});
  const at::Tensor lengths = at::tensor({static_cast<int32_t>(context)}, at::kInt);
  const at::Tensor starts = at::tensor({0, 1}, at::kInt);
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape->head_dim));
  const double layer_bytes = 2.0 * context * shape->kv_heads * shape->head_dim * 2;
  std::printf(
      "shape %s (%lld heads, %lld KV heads, head_dim %lld), context %lld, %lld layers of %.1f MB, %d threads, %s "
      "pages\n",
      shape->name, static_cast<long long>(shape->heads), static_cast<long long>(shape->kv_heads),
      static_cast<long long>(shape->head_dim), static_cast<long long>(context), static_cast<long long>(num_layers),
      layer_bytes / 1e6, at::get_num_threads(), small_pages ? "small" : "huge");

  std::vector<std::vector<double>> per_layer_us(chunk_settings.size());
  for (int64_t step = 0; step < steps + 1; ++step) {  // the first round warms up
    for (size_t s = 0; s < chunk_settings.size(); ++s) {
      const auto start = std::chrono::steady_clock::now();
      for (const Layer& layer : layers) {
        llmc::model::PagedAttentionCpuInChunks(query, layer.key_cache, layer.value_cache, tables, lengths, starts,
                                               scale, /*window=*/0, c10::nullopt, chunk_settings[s]);
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      if (step > 0) per_layer_us[s].push_back(us / static_cast<double>(num_layers));
    }
  }
  for (size_t s = 0; s < chunk_settings.size(); ++s) {
    const double median = MedianOf(per_layer_us[s]);
    const double best = *std::min_element(per_layer_us[s].begin(), per_layer_us[s].end());
    const std::string name = chunk_settings[s] == llmc::model::kWholeContext
                                 ? std::string("whole context")
                                 : "chunks of " + std::to_string(chunk_settings[s]);
    std::printf("%-18s %9.1f us per layer (best %.1f), %6.1f GB/s of cache read\n", name.c_str(), median, best,
                layer_bytes / median / 1e3);
  }
  return 0;
}
