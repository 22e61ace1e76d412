#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/thread_team.h"
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

using AttendKernel = void (*)(const cpu::AttentionArgs&);

AttendKernel SelectAttendKernel() {
#ifdef LLMC_CPU_X86_KERNELS
  const cpu::CpuIsa isa = cpu::ActiveCpuIsa();
  if (isa >= cpu::CpuIsa::kAvx512Bf16) return &cpu::AttendAvx512;
  if (isa == cpu::CpuIsa::kAvx2) return &cpu::AttendAvx2;
#endif
  return &cpu::AttendPortable;
}

// One work item: a tile of up to kAttentionRowTile query rows of one sequence, for one KV head and the
// query heads that share it.
struct AttentionTile {
  int32_t sequence;
  int32_t first_row;
  int32_t num_rows;
  int32_t first_position;
  int32_t kv_head;
};

// Tiles are independent; the team takes them from a shared counter, longest context first, so a long
// prefill's last tiles do not leave one thread working alone at the end.
void AttendTiles(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                 const at::Tensor& block_tables, std::vector<AttentionTile>& tiles, float scale, int64_t window,
                 const float* sinks, at::Tensor& out) {
  const int64_t num_heads = query.size(1), head_dim = query.size(2);
  const int64_t block_size = key_cache.size(1), num_kv_heads = key_cache.size(2);
  const int64_t group = num_heads / num_kv_heads;
  std::sort(tiles.begin(), tiles.end(), [](const AttentionTile& a, const AttentionTile& b) {
    return a.first_position + a.num_rows > b.first_position + b.num_rows;
  });
  const AttendKernel kernel = SelectAttendKernel();
  const int64_t scratch_floats = cpu::AttentionScratchFloats(group, head_dim, block_size);
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  const int64_t max_blocks = block_tables.size(1);
  // One share that every member takes from the front: the tiles go out longest first, which balances the
  // members better than contiguous shares would (there is no weight stream to keep contiguous here).
  cpu::WorkQueue queue(static_cast<int64_t>(tiles.size()), /*members=*/1);
  cpu::ThreadTeam::Get().Run([&](cpu::TeamMember& member) {
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < scratch_floats) scratch.resize(scratch_floats);
    for (auto [i, end] = queue.Claim(member, 1); i < end; std::tie(i, end) = queue.Claim(member, 1)) {
      const AttentionTile& tile = tiles[i];
      cpu::AttentionArgs args{query.data_ptr(),
                              out.data_ptr(),
                              key_cache.data_ptr(),
                              value_cache.data_ptr(),
                              tables + tile.sequence * max_blocks,
                              tile.first_row,
                              tile.num_rows,
                              tile.first_position,
                              window,
                              num_heads,
                              num_kv_heads,
                              head_dim,
                              block_size,
                              tile.kv_head,
                              scale,
                              query.scalar_type() == at::kBFloat16,
                              scratch.data(),
                              sinks};
      kernel(args);
    }
  });
}

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
                             const at::Tensor& seq_lens_in, const at::Tensor& query_start_locs_in, double scale,
                             int64_t window, const c10::optional<at::Tensor>& sinks_in) {
  CheckInputs(query_in, key_cache_in, value_cache_in, block_tables_in, seq_lens_in, query_start_locs_in);
  TORCH_CHECK(window >= 0, "paged_attention: window must be 0 (the whole context) or positive, got ", window);
  const bool has_sinks = sinks_in.has_value() && sinks_in->defined() && sinks_in->numel() > 0;
  TORCH_CHECK(!has_sinks || sinks_in->numel() == query_in.size(1),
              "paged_attention: sinks must hold one logit per query head");
  const at::Tensor sinks = has_sinks ? sinks_in->to(at::kFloat).contiguous() : at::Tensor();
  const at::Tensor query = query_in.contiguous(), key_cache = key_cache_in.contiguous(),
                   value_cache = value_cache_in.contiguous(), block_tables = block_tables_in.contiguous();
  const at::Tensor seq_lens = seq_lens_in.contiguous(), starts = query_start_locs_in.contiguous();
  const int64_t num_tokens = query.size(0), num_sequences = seq_lens.size(0);
  const int64_t block_size = key_cache.size(1);
  std::vector<int32_t> row_sequence(num_tokens, -1);
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
    }
  }
  TORCH_CHECK(std::none_of(row_sequence.begin(), row_sequence.end(), [](int32_t s) { return s < 0; }),
              "paged_attention: query rows not covered by query_start_locs");
  // Only the blocks a sequence's context uses must be valid; the rest of its table row is padding.
  const int64_t blocks_in_cache = key_cache.size(0), max_blocks = block_tables.size(1);
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  for (int64_t s = 0; s < num_sequences; ++s) {
    for (int64_t b = 0; b < (lengths[s] + block_size - 1) / block_size; ++b) {
      const int32_t block = tables[s * max_blocks + b];
      TORCH_CHECK(block >= 0 && block < blocks_in_cache, "paged_attention: block id outside the cache");
    }
  }
  TORCH_CHECK(query.scalar_type() == at::kBFloat16 || query.scalar_type() == at::kFloat,
              "paged_attention: bfloat16 or float32 only on the CPU");
  TORCH_CHECK(query.size(2) <= 512, "paged_attention: head_dim above 512");
  at::Tensor out = at::empty_like(query);
  std::vector<AttentionTile> tiles;
  const int64_t num_kv_heads = key_cache.size(2);
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int32_t first = start[s], count = start[s + 1] - start[s];
    for (int32_t offset = 0; offset < count; offset += static_cast<int32_t>(cpu::kAttentionRowTile)) {
      const int32_t rows = std::min<int32_t>(static_cast<int32_t>(cpu::kAttentionRowTile), count - offset);
      for (int64_t kv_head = 0; kv_head < num_kv_heads; ++kv_head) {
        tiles.push_back({static_cast<int32_t>(s), first + offset, rows, lengths[s] - count + offset,
                         static_cast<int32_t>(kv_head)});
      }
    }
  }
  if (!tiles.empty()) {
    AttendTiles(query, key_cache, value_cache, block_tables, tiles, static_cast<float>(scale), window,
                has_sinks ? sinks.data_ptr<float>() : nullptr, out);
  }
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
      "Tensor seq_lens, Tensor query_start_locs, float scale, int window=0, Tensor? sinks=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(llmc, CPU, m) {
  m.impl("write_kv_cache", [](const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                              at::Tensor& value_cache, const at::Tensor& slot_mapping) {
    llmc::model::WriteKvCacheCpu(key, value, key_cache, value_cache, slot_mapping);
  });
  m.impl("paged_attention", &llmc::model::PagedAttentionCpu);
}
