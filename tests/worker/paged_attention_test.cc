// The C++ CPU kernels of llmc::paged_attention / llmc::write_kv_cache against a plain ATen reference.
#include <ATen/core/dispatch/Dispatcher.h>

#include <random>

#include "tests/support/catch.h"
#include "tests/support/cpu_kernel_paths.h"
#include "tests/support/team_size.h"
#include "worker/model/paged_attention_ops.h"

namespace llmc::model {
namespace {

// The same computation as tools/llmc_export/ops.py: gather each sequence's context, causal softmax (with a
// window, keys at positions <= query position - window masked too).
at::Tensor ReferenceAttention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                              const at::Tensor& block_tables, const at::Tensor& seq_lens, const at::Tensor& starts,
                              double scale, int64_t window = 0, const at::Tensor& sinks = at::Tensor()) {
  const int64_t heads = query.size(1), block_size = key_cache.size(1), kv_heads = key_cache.size(2);
  const int64_t dim = query.size(2);
  at::Tensor out = at::zeros_like(query, at::kFloat);
  for (int64_t s = 0; s < seq_lens.size(0); ++s) {
    const int64_t begin = starts[s].item<int64_t>(), end = starts[s + 1].item<int64_t>();
    const int64_t context = seq_lens[s].item<int64_t>(), n = end - begin;
    if (n == 0) continue;
    const at::Tensor blocks = block_tables[s].narrow(0, 0, (context + block_size - 1) / block_size).to(at::kLong);
    at::Tensor keys =
        key_cache.index_select(0, blocks).reshape({-1, kv_heads, dim}).narrow(0, 0, context).to(at::kFloat);
    at::Tensor values =
        value_cache.index_select(0, blocks).reshape({-1, kv_heads, dim}).narrow(0, 0, context).to(at::kFloat);
    keys = keys.repeat_interleave(heads / kv_heads, 1);
    values = values.repeat_interleave(heads / kv_heads, 1);
    const at::Tensor q = query.narrow(0, begin, n).to(at::kFloat);
    at::Tensor scores = at::einsum("qhd,khd->hqk", {q, keys}) * scale;
    const at::Tensor query_positions = at::arange(context - n, context).unsqueeze(1);
    const at::Tensor key_positions = at::arange(context).unsqueeze(0);
    at::Tensor hidden = key_positions > query_positions;
    if (window > 0) hidden = hidden.logical_or(key_positions <= query_positions - window);
    scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
    at::Tensor probabilities = at::softmax(scores, -1);
    if (sinks.defined()) {  // one more logit per head that weighs no value
      const at::Tensor sink = sinks.to(at::kFloat).reshape({heads, 1, 1}).expand({heads, n, 1});
      probabilities = at::softmax(at::cat({scores, sink}, -1), -1).narrow(2, 0, context);
    }
    out.narrow(0, begin, n).copy_(at::einsum("hqk,khd->qhd", {probabilities, values}));
  }
  return out;
}

struct Case {
  int64_t heads, kv_heads, head_dim, block_size;
};

TEST_CASE("paged attention CPU kernel equals the reference on random shapes, on every kernel path",
          "[unit][paged_attention]") {
  std::mt19937 random(42);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const Case c : {Case{4, 4, 64, 16}, Case{8, 4, 128, 32}, Case{14, 2, 64, 16}, Case{7, 1, 128, 32},
                         Case{2, 1, 64, 32}, Case{14, 2, 128, 16}, Case{8, 8, 96, 16}}) {
      at::manual_seed(c.heads * 1000 + c.head_dim + c.block_size);
      const int64_t num_blocks = 40;
      const auto options = at::TensorOptions().dtype(dtype);
      const at::Tensor key_cache = at::randn({num_blocks, c.block_size, c.kv_heads, c.head_dim}, options);
      const at::Tensor value_cache = at::randn({num_blocks, c.block_size, c.kv_heads, c.head_dim}, options);
      // Mixed batch: a long prefill chunk, decode rows, a chunk continuing a cached prefix, a one-token prompt.
      const std::vector<std::pair<int64_t, int64_t>> sequences = {{37, 37}, {70, 1}, {5, 1}, {50, 18}, {1, 1}};
      std::vector<int32_t> lengths, starts = {0};
      std::vector<int32_t> all_blocks(num_blocks);
      std::iota(all_blocks.begin(), all_blocks.end(), 0);
      std::shuffle(all_blocks.begin(), all_blocks.end(), random);
      const int64_t width = (70 + c.block_size - 1) / c.block_size;
      at::Tensor tables = at::zeros({static_cast<int64_t>(sequences.size()), width}, at::kInt);
      size_t next_block = 0;
      for (size_t s = 0; s < sequences.size(); ++s) {
        const auto [context, rows] = sequences[s];
        lengths.push_back(static_cast<int32_t>(context));
        starts.push_back(starts.back() + static_cast<int32_t>(rows));
        for (int64_t b = 0; b < (context + c.block_size - 1) / c.block_size; ++b) {
          tables[s][b] = all_blocks[next_block++];
        }
      }
      const at::Tensor seq_lens = at::tensor(lengths, at::kInt), query_starts = at::tensor(starts, at::kInt);
      const at::Tensor query = at::randn({starts.back(), c.heads, c.head_dim}, options);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      const at::Tensor expected =
          ReferenceAttention(query, key_cache, value_cache, tables, seq_lens, query_starts, scale);
      testing::ForEachCpuKernelPath([&] {
        // The whole context as one chunk, and split into chunks of one block and of two blocks and more.
        for (const int64_t chunk_tokens : {kWholeContext, int64_t{1}, int64_t{40}}) {
          const at::Tensor ours = PagedAttentionCpuInChunks(query, key_cache, value_cache, tables, seq_lens,
                                                            query_starts, scale, 0, c10::nullopt, chunk_tokens);
          const double difference = (ours.to(at::kFloat) - expected).abs().max().item<double>();
          INFO("dtype " << dtype << " heads " << c.heads << "/" << c.kv_heads << " dim " << c.head_dim << " block "
                        << c.block_size << " chunks of " << chunk_tokens << " tokens, max difference " << difference);
          CHECK(ours.scalar_type() == dtype);
          // bfloat16 output is rounded to 8 mantissa bits; values are weighted means of N(0,1) samples.
          CHECK(difference < (dtype == at::kFloat ? 1e-5 : 2e-2));
        }
      });
    }
  }
}

TEST_CASE(
    "paged attention with a window sees only the last W positions of each row, and with sinks weighs each head's sink "
    "logit, on every kernel path",
    "[unit][paged_attention]") {
  // Windows below a block, across blocks and past the context; rows of a prefill chunk that crosses the window's
  // edge, decode rows past it, a sequence shorter than the window.
  const std::vector<std::pair<int64_t, int64_t>> sequences = {{37, 37}, {70, 1}, {50, 18}, {5, 1}, {33, 3}};
  std::mt19937 random(7);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const Case c : {Case{4, 4, 64, 16}, Case{8, 2, 128, 16}, Case{2, 1, 64, 32}}) {
      at::manual_seed(c.heads * 100 + c.block_size);
      const int64_t num_blocks = 24;
      const auto options = at::TensorOptions().dtype(dtype);
      const at::Tensor key_cache = at::randn({num_blocks, c.block_size, c.kv_heads, c.head_dim}, options);
      const at::Tensor value_cache = at::randn({num_blocks, c.block_size, c.kv_heads, c.head_dim}, options);
      std::vector<int32_t> lengths, starts = {0}, all_blocks(num_blocks);
      std::iota(all_blocks.begin(), all_blocks.end(), 0);
      std::shuffle(all_blocks.begin(), all_blocks.end(), random);
      at::Tensor tables =
          at::zeros({static_cast<int64_t>(sequences.size()), (70 + c.block_size - 1) / c.block_size}, at::kInt);
      size_t next_block = 0;
      for (size_t s = 0; s < sequences.size(); ++s) {
        lengths.push_back(static_cast<int32_t>(sequences[s].first));
        starts.push_back(starts.back() + static_cast<int32_t>(sequences[s].second));
        for (int64_t b = 0; b < (sequences[s].first + c.block_size - 1) / c.block_size; ++b) {
          tables[s][b] = all_blocks[next_block++];
        }
      }
      const at::Tensor seq_lens = at::tensor(lengths, at::kInt), query_starts = at::tensor(starts, at::kInt);
      const at::Tensor query = at::randn({starts.back(), c.heads, c.head_dim}, options);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      // GPT-OSS's attention sinks (a logit per head, some far above the scores, some far below), with and
      // without a window.
      const at::Tensor sinks = at::randn({c.heads}) * 3.0;
      for (const int64_t window : {0, 1, 5, 16, 24, 40, 100}) {
        for (const bool with_sinks : {false, true}) {
          if (window == 0 && !with_sinks) continue;  // the first test case's
          const at::Tensor sink_operand = with_sinks ? sinks : at::Tensor();
          const at::Tensor expected = ReferenceAttention(query, key_cache, value_cache, tables, seq_lens, query_starts,
                                                         scale, window, sink_operand);
          testing::ForEachCpuKernelPath([&] {
            for (const int64_t chunk_tokens : {kWholeContext, int64_t{1}, int64_t{40}}) {
              const at::Tensor ours = PagedAttentionCpuInChunks(
                  query, key_cache, value_cache, tables, seq_lens, query_starts, scale, window,
                  with_sinks ? c10::optional<at::Tensor>(sinks.to(dtype)) : c10::nullopt, chunk_tokens);
              const double difference = (ours.to(at::kFloat) - expected).abs().max().item<double>();
              INFO("dtype " << dtype << " heads " << c.heads << "/" << c.kv_heads << " dim " << c.head_dim << " block "
                            << c.block_size << " window " << window << (with_sinks ? " with sinks" : "")
                            << " chunks of " << chunk_tokens << " tokens, max difference " << difference);
              CHECK(difference < (dtype == at::kFloat ? 1e-5 : 2e-2));
            }
          });
        }
      }
    }
  }
  const at::Tensor cache = at::zeros({2, 16, 2, 8});
  CHECK_THROWS_WITH(PagedAttentionCpu(at::zeros({1, 2, 8}), cache, cache, at::zeros({1, 1}, at::kInt),
                                      at::tensor({1}, at::kInt), at::tensor({0, 1}, at::kInt), 1.0, -1),
                    Catch::Contains("window"));
}

TEST_CASE(
    "paged attention split into chunks gives a row the same bits decoded alone as inside a prefill chunk, with and "
    "without a window",
    "[unit][paged_attention]") {
  // What makes a sequence's output independent of its batch: a row's chunks are fixed by its position alone. With
  // four KV heads and chunks of one block, late decode rows walk all their heads in one item (at least two chunks
  // per thread) while the prefill's 16-row tiles take an item per head: the heads' arithmetic must not differ.
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const auto& setting : {std::pair<int64_t, int64_t>{1, 32}, {4, 16}}) {
      // Plain names: a lambda below uses them, and C++17 lambdas cannot capture structured bindings.
      const int64_t kv_heads = setting.first, chunk_tokens = setting.second;
      const int64_t block_size = 16, context = 150, blocks = (context + block_size - 1) / block_size;
      at::manual_seed(11);
      const auto options = at::TensorOptions().dtype(dtype);
      const at::Tensor key_cache = at::randn({blocks, block_size, kv_heads, 64}, options);
      const at::Tensor value_cache = at::randn({blocks, block_size, kv_heads, 64}, options);
      const at::Tensor tables = at::arange(blocks, at::kInt).unsqueeze(0);
      const at::Tensor query = at::randn({context, 4 * kv_heads, 64}, options);
      const at::Tensor seq_lens = at::tensor({static_cast<int32_t>(context)}, at::kInt);
      for (const int64_t window : {0, 70}) {
        testing::ForEachCpuKernelPath([&] {
          // A team of one and of two: with two, a row's chunks run on both threads and merge after a barrier.
          at::Tensor on_one_thread;
          for (const int threads : {1, 2}) {
            const testing::ScopedTeamSize team(threads);
            const at::Tensor prefill = PagedAttentionCpuInChunks(
                query, key_cache, value_cache, tables, seq_lens,
                at::tensor({0, static_cast<int32_t>(context)}, at::kInt), 0.125, window, c10::nullopt, chunk_tokens);
            for (const int64_t position : {int64_t{20}, int64_t{31}, int64_t{32}, int64_t{100}, context - 1}) {
              const at::Tensor decode =
                  PagedAttentionCpuInChunks(query.narrow(0, position, 1), key_cache, value_cache, tables,
                                            at::tensor({static_cast<int32_t>(position + 1)}, at::kInt),
                                            at::tensor({0, 1}, at::kInt), 0.125, window, c10::nullopt, chunk_tokens);
              INFO("dtype " << dtype << " KV heads " << kv_heads << " window " << window << " position " << position
                            << " threads " << threads);
              CHECK(at::equal(decode, prefill.narrow(0, position, 1)));
            }
            if (threads == 1) {
              on_one_thread = prefill;
            } else {
              CHECK(at::equal(prefill, on_one_thread));
            }
          }
        });
      }
    }
  }
}

TEST_CASE("the served paged attention splits every context into chunks of kAttentionChunkTokens",
          "[unit][paged_attention]") {
  // A context of 9 chunks: on a team of two, a decode row of several KV heads walks them together.
  const int64_t block_size = 16, context = 8 * kAttentionChunkTokens + 5,
                blocks = (context + block_size - 1) / block_size;
  at::manual_seed(12);
  const at::Tensor tables = at::arange(blocks, at::kInt).unsqueeze(0);
  const at::Tensor seq_lens = at::tensor({static_cast<int32_t>(context)}, at::kInt);
  const at::Tensor starts = at::tensor({0, 1}, at::kInt);
  const testing::ScopedTeamSize team(2);
  for (const int64_t kv_heads : {1, 2, 8}) {
    const at::Tensor key_cache = at::randn({blocks, block_size, kv_heads, 64}, at::kFloat);
    const at::Tensor value_cache = at::randn({blocks, block_size, kv_heads, 64}, at::kFloat);
    const at::Tensor query = at::randn({1, 2 * kv_heads, 64}, at::kFloat);
    const at::Tensor served =
        PagedAttentionCpu(query, key_cache, value_cache, tables, seq_lens, starts, 0.125, 0, c10::nullopt);
    const at::Tensor split = PagedAttentionCpuInChunks(query, key_cache, value_cache, tables, seq_lens, starts, 0.125,
                                                       0, c10::nullopt, kAttentionChunkTokens);
    const at::Tensor whole = PagedAttentionCpuInChunks(query, key_cache, value_cache, tables, seq_lens, starts, 0.125,
                                                       0, c10::nullopt, kWholeContext);
    INFO(kv_heads << " KV heads on a team of two");
    // float32 output, so the two ways of summing differ somewhere and the check below can tell them apart.
    REQUIRE_FALSE(at::equal(split, whole));
    CHECK(at::equal(served, split));
    CHECK((served - whole).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("paged attention through the dispatcher: no window argument means the whole context",
          "[unit][paged_attention]") {
  EnsurePagedAttentionOpsRegistered();
  const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("llmc::paged_attention", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&, double, int64_t, const c10::optional<at::Tensor>&)>();
  const at::Tensor cache = at::randn({2, 16, 1, 8}), values = at::randn({2, 16, 1, 8});
  const at::Tensor tables = at::tensor({0, 1}, at::kInt).reshape({1, 2});
  const at::Tensor query = at::randn({1, 2, 8}), seq_lens = at::tensor({20}, at::kInt);
  const at::Tensor starts = at::tensor({0, 1}, at::kInt);
  const at::Tensor full = op.call(query, cache, values, tables, seq_lens, starts, 0.5, 0, c10::nullopt);
  CHECK(at::allclose(full, ReferenceAttention(query, cache, values, tables, seq_lens, starts, 0.5), 1e-5, 1e-6));
  const at::Tensor windowed = op.call(query, cache, values, tables, seq_lens, starts, 0.5, 3, c10::nullopt);
  CHECK(at::allclose(windowed, ReferenceAttention(query, cache, values, tables, seq_lens, starts, 0.5, 3), 1e-5, 1e-6));
  CHECK_FALSE(at::allclose(windowed, full, 1e-3, 1e-3));
  const at::Tensor sinks = at::tensor({1.5f, -0.5f});
  const at::Tensor with_sinks = op.call(query, cache, values, tables, seq_lens, starts, 0.5, 0, sinks);
  CHECK(at::allclose(with_sinks, ReferenceAttention(query, cache, values, tables, seq_lens, starts, 0.5, 0, sinks),
                     1e-5, 1e-6));
}

TEST_CASE("write_kv_cache stores rows in their slots and refuses slots outside the cache", "[unit][paged_attention]") {
  at::Tensor key_cache = at::zeros({4, 16, 2, 8}), value_cache = at::zeros({4, 16, 2, 8});
  const at::Tensor key = at::randn({3, 2, 8}), value = at::randn({3, 2, 8});
  WriteKvCacheCpu(key, value, key_cache, value_cache, at::tensor({5, 16 * 3 + 15, 0}, at::kLong));
  CHECK(at::equal(key_cache[0][5], key[0]));
  CHECK(at::equal(key_cache[3][15], key[1]));
  CHECK(at::equal(value_cache[0][0], value[2]));
  CHECK(key_cache.abs().sum().item<float>() == Approx((key.abs().sum()).item<float>()));
  CHECK_THROWS_WITH(WriteKvCacheCpu(key, value, key_cache, value_cache, at::tensor({0, 1, 64}, at::kLong)),
                    Catch::Contains("slot outside the cache"));
  CHECK_THROWS_WITH(WriteKvCacheCpu(key, value, key_cache, value_cache, at::tensor({0, 1}, at::kLong)),
                    Catch::Contains("one slot per token"));
}

TEST_CASE("the operators are registered with the dispatcher under llmc::", "[unit][paged_attention]") {
  EnsurePagedAttentionOpsRegistered();
  const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow("llmc::paged_attention", "");
  // The window, defaulting to 0, then the sinks, defaulting to none: graphs recorded before either still match.
  REQUIRE(handle.schema().arguments().size() == 9);
  CHECK(handle.schema().arguments()[7].name() == "window");
  CHECK(handle.schema().arguments()[7].default_value().has_value());
  CHECK(handle.schema().arguments()[8].name() == "sinks");
  CHECK(handle.schema().arguments()[8].default_value().has_value());
  CHECK(c10::Dispatcher::singleton().findSchema({"llmc::write_kv_cache", ""}).has_value());
}

TEST_CASE("paged attention rejects inconsistent inputs with a message", "[unit][paged_attention]") {
  const at::Tensor cache = at::zeros({2, 16, 2, 8});
  const at::Tensor query = at::zeros({2, 4, 8});
  const at::Tensor tables = at::zeros({1, 1}, at::kInt);
  CHECK_THROWS_WITH(
      PagedAttentionCpu(query, cache, cache, tables, at::tensor({20}, at::kInt), at::tensor({0, 2}, at::kInt), 1.0),
      Catch::Contains("block table too short"));
  CHECK_THROWS_WITH(PagedAttentionCpu(query, cache, cache, at::full({1, 1}, 9, at::kInt), at::tensor({2}, at::kInt),
                                      at::tensor({0, 2}, at::kInt), 1.0),
                    Catch::Contains("block id outside the cache"));
  CHECK_THROWS_WITH(PagedAttentionCpu(at::zeros({2, 3, 8}), cache, cache, tables, at::tensor({2}, at::kInt),
                                      at::tensor({0, 2}, at::kInt), 1.0),
                    Catch::Contains("multiple of kv_heads"));
}

}  // namespace
}  // namespace llmc::model
