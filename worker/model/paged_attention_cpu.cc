#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "worker/model/paged_attention_ops.h"

namespace llmc::model {
namespace {

void CheckInputs(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                 const at::Tensor& block_tables, const at::Tensor& seq_lens, const at::Tensor& query_start_locs) {
  TORCH_CHECK(query.dim() == 3, "paged_attention: query must be [tokens, heads, head_dim]");
  TORCH_CHECK(key_cache.dim() == 4 && value_cache.sizes() == key_cache.sizes(),
              "paged_attention: caches must both be [blocks, block_size, kv_heads, head_dim]");
  TORCH_CHECK(key_cache.size(3) == query.size(2), "paged_attention: head_dim differs between query and cache");
  TORCH_CHECK(query.size(1) % key_cache.size(2) == 0, "paged_attention: heads must be a multiple of kv_heads");
  TORCH_CHECK(key_cache.scalar_type() == query.scalar_type() && value_cache.scalar_type() == query.scalar_type(),
              "paged_attention: query and caches must share a dtype");
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.scalar_type() == at::kInt,
              "paged_attention: block_tables must be int32 [seqs, max_blocks]");
  TORCH_CHECK(seq_lens.dim() == 1 && seq_lens.scalar_type() == at::kInt && seq_lens.size(0) == block_tables.size(0),
              "paged_attention: seq_lens must be int32 [seqs]");
  TORCH_CHECK(query_start_locs.dim() == 1 && query_start_locs.scalar_type() == at::kInt &&
                  query_start_locs.size(0) == seq_lens.size(0) + 1,
              "paged_attention: query_start_locs must be int32 [seqs + 1]");
}

// One (query row, head) at a time: scores over the row's causal context, softmax, weighted values.
template <typename scalar_t>
void AttendRows(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                const at::Tensor& block_tables, const std::vector<int32_t>& rows,
                const std::vector<int32_t>& row_sequence, const std::vector<int32_t>& row_position, float scale,
                at::Tensor& out) {
  const int64_t num_rows = static_cast<int64_t>(rows.size()), num_heads = query.size(1), head_dim = query.size(2);
  const int64_t block_size = key_cache.size(1), num_kv_heads = key_cache.size(2);
  const int64_t group = num_heads / num_kv_heads;
  const int64_t max_blocks = block_tables.size(1);
  const scalar_t* q_data = query.data_ptr<scalar_t>();
  const scalar_t* k_data = key_cache.data_ptr<scalar_t>();
  const scalar_t* v_data = value_cache.data_ptr<scalar_t>();
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  scalar_t* out_data = out.data_ptr<scalar_t>();
  const int64_t token_stride = block_size * num_kv_heads * head_dim;  // one block
  at::parallel_for(0, num_rows * num_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> q(head_dim), accumulator(head_dim), scores;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = rows[item / num_heads], head = item % num_heads, kv_head = head / group;
      const int32_t sequence = row_sequence[row];
      const int64_t context = row_position[row] + 1;
      const scalar_t* q_row = q_data + (row * num_heads + head) * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) q[d] = static_cast<float>(q_row[d]) * scale;
      scores.resize(context);
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t position = 0; position < context; ++position) {
        const int64_t block = tables[sequence * max_blocks + position / block_size];
        const scalar_t* k_row =
            k_data + block * token_stride + ((position % block_size) * num_kv_heads + kv_head) * head_dim;
        float dot = 0;
        for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * static_cast<float>(k_row[d]);
        scores[position] = dot;
        max_score = std::max(max_score, dot);
      }
      float total = 0;
      for (int64_t position = 0; position < context; ++position) {
        scores[position] = std::exp(scores[position] - max_score);
        total += scores[position];
      }
      std::fill(accumulator.begin(), accumulator.end(), 0.0f);
      for (int64_t position = 0; position < context; ++position) {
        const int64_t block = tables[sequence * max_blocks + position / block_size];
        const scalar_t* v_row =
            v_data + block * token_stride + ((position % block_size) * num_kv_heads + kv_head) * head_dim;
        const float weight = scores[position];
        for (int64_t d = 0; d < head_dim; ++d) accumulator[d] += weight * static_cast<float>(v_row[d]);
      }
      scalar_t* out_row = out_data + (row * num_heads + head) * head_dim;
      const float inverse_total = 1.0f / total;
      for (int64_t d = 0; d < head_dim; ++d) out_row[d] = static_cast<scalar_t>(accumulator[d] * inverse_total);
    }
  });
}

// A sequence with many query rows (a prefill chunk) as two batched matrix products in float32, so BLAS
// does the heavy lifting; grouped-query heads share their KV head's matrices.
void AttendChunk(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                 const at::Tensor& block_table, int64_t first_row, int64_t num_rows, int64_t context, double scale,
                 at::Tensor& out) {
  const int64_t num_heads = query.size(1), head_dim = query.size(2);
  const int64_t block_size = key_cache.size(1), num_kv_heads = key_cache.size(2), group = num_heads / num_kv_heads;
  const at::Tensor blocks = block_table.narrow(0, 0, (context + block_size - 1) / block_size).to(at::kLong);
  const auto gather = [&](const at::Tensor& cache) {  // [kv_heads, context, head_dim]
    return cache.index_select(0, blocks)
        .reshape({-1, num_kv_heads, head_dim})
        .narrow(0, 0, context)
        .to(at::kFloat)
        .permute({1, 0, 2});
  };
  const at::Tensor keys = gather(key_cache), values = gather(value_cache);
  const at::Tensor q = query.narrow(0, first_row, num_rows)
                           .to(at::kFloat)
                           .reshape({num_rows, num_kv_heads, group, head_dim})
                           .permute({1, 2, 0, 3})
                           .reshape({num_kv_heads, group * num_rows, head_dim});
  at::Tensor scores = at::matmul(q, keys.transpose(1, 2)).mul_(scale);  // [kv_heads, group * rows, context]
  const at::Tensor query_positions = at::arange(context - num_rows, context).repeat({group}).unsqueeze(1);
  const at::Tensor key_positions = at::arange(context).unsqueeze(0);
  scores.masked_fill_(key_positions > query_positions, -std::numeric_limits<float>::infinity());
  const at::Tensor attended = at::matmul(at::softmax(scores, -1), values)  // [kv_heads, group * rows, head_dim]
                                  .reshape({num_kv_heads, group, num_rows, head_dim})
                                  .permute({2, 0, 1, 3})
                                  .reshape({num_rows, num_heads, head_dim});
  out.narrow(0, first_row, num_rows).copy_(attended);
}

// Chunks at least this long go through AttendChunk; shorter ones (decode) through the row kernel.
constexpr int32_t kMatmulRows = 8;

}  // namespace

void WriteKvCacheCpu(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache, at::Tensor& value_cache,
                     const at::Tensor& slot_mapping) {
  TORCH_CHECK(key_cache.dim() == 4 && value_cache.sizes() == key_cache.sizes(),
              "write_kv_cache: caches must both be [blocks, block_size, kv_heads, head_dim]");
  TORCH_CHECK(key.dim() == 3 && value.sizes() == key.sizes() && key.size(1) == key_cache.size(2) &&
                  key.size(2) == key_cache.size(3),
              "write_kv_cache: key and value must be [tokens, kv_heads, head_dim] matching the cache");
  TORCH_CHECK(slot_mapping.dim() == 1 && slot_mapping.size(0) == key.size(0),
              "write_kv_cache: slot_mapping must have one slot per token");
  const int64_t capacity = key_cache.size(0) * key_cache.size(1);
  if (slot_mapping.numel() > 0) {
    const auto [low, high] = at::aminmax(slot_mapping);
    TORCH_CHECK(low.item<int64_t>() >= 0 && high.item<int64_t>() < capacity, "write_kv_cache: slot outside the cache (",
                capacity, " slots)");
  }
  const auto slots = slot_mapping.to(at::kLong);
  key_cache.view({capacity, key_cache.size(2), key_cache.size(3)}).index_copy_(0, slots, key.to(key_cache.dtype()));
  value_cache.view({capacity, value_cache.size(2), value_cache.size(3)})
      .index_copy_(0, slots, value.to(value_cache.dtype()));
}

at::Tensor PagedAttentionCpu(const at::Tensor& query_in, const at::Tensor& key_cache_in,
                             const at::Tensor& value_cache_in, const at::Tensor& block_tables_in,
                             const at::Tensor& seq_lens_in, const at::Tensor& query_start_locs_in, double scale) {
  CheckInputs(query_in, key_cache_in, value_cache_in, block_tables_in, seq_lens_in, query_start_locs_in);
  const at::Tensor query = query_in.contiguous(), key_cache = key_cache_in.contiguous(),
                   value_cache = value_cache_in.contiguous(), block_tables = block_tables_in.contiguous();
  const at::Tensor seq_lens = seq_lens_in.contiguous(), starts = query_start_locs_in.contiguous();
  const int64_t num_tokens = query.size(0), num_sequences = seq_lens.size(0);
  const int64_t block_size = key_cache.size(1);
  std::vector<int32_t> row_sequence(num_tokens, -1), row_position(num_tokens, 0);
  const int32_t* lengths = seq_lens.data_ptr<int32_t>();
  const int32_t* start = starts.data_ptr<int32_t>();
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int32_t first = start[s], last = start[s + 1], context = lengths[s];
    TORCH_CHECK(first >= 0 && first <= last && last <= num_tokens, "paged_attention: query_start_locs out of order");
    TORCH_CHECK(last - first <= context, "paged_attention: more query rows than context for sequence ", s);
    TORCH_CHECK((context + block_size - 1) / block_size <= block_tables.size(1),
                "paged_attention: block table too short for sequence ", s);
    for (int32_t row = first; row < last; ++row) {
      row_sequence[row] = static_cast<int32_t>(s);
      row_position[row] = context - (last - first) + (row - first);
    }
  }
  TORCH_CHECK(std::none_of(row_sequence.begin(), row_sequence.end(), [](int32_t s) { return s < 0; }),
              "paged_attention: query rows not covered by query_start_locs");
  const auto blocks_in_cache = key_cache.size(0);
  TORCH_CHECK(block_tables.numel() == 0 ||
                  (block_tables.min().item<int32_t>() >= 0 && block_tables.max().item<int32_t>() < blocks_in_cache),
              "paged_attention: block id outside the cache");
  at::Tensor out = at::empty_like(query);
  std::vector<int32_t> short_rows;
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int32_t first = start[s], count = start[s + 1] - start[s];
    if (count >= kMatmulRows) {
      AttendChunk(query, key_cache, value_cache, block_tables[s], first, count, lengths[s], scale, out);
    } else {
      for (int32_t row = first; row < first + count; ++row) short_rows.push_back(row);
    }
  }
  if (short_rows.empty()) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, query.scalar_type(), "paged_attention_cpu", [&] {
    AttendRows<scalar_t>(query, key_cache, value_cache, block_tables, short_rows, row_sequence, row_position,
                         static_cast<float>(scale), out);
  });
  return out;
}

bool EnsurePagedAttentionOpsRegistered() { return true; }

}  // namespace llmc::model

TORCH_LIBRARY(llmc, m) {
  m.def(
      "write_kv_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
      "Tensor slot_mapping) -> ()");
  m.def(
      "paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, "
      "Tensor seq_lens, Tensor query_start_locs, float scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(llmc, CPU, m) {
  m.impl("write_kv_cache", [](const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                              at::Tensor& value_cache, const at::Tensor& slot_mapping) {
    llmc::model::WriteKvCacheCpu(key, value, key_cache, value_cache, slot_mapping);
  });
  m.impl("paged_attention", &llmc::model::PagedAttentionCpu);
}
