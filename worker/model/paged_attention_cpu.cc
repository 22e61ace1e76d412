#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/output_pool.h"
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

// The largest head the CPU kernels take (MergeChunks keeps one on its stack).
constexpr int64_t kMaxHeadDim = 512;

AttendKernel SelectAttendKernel() {
#ifdef LLMC_CPU_X86_KERNELS
  const cpu::CpuIsa isa = cpu::ActiveCpuIsa();
  if (isa >= cpu::CpuIsa::kAvx512Bf16) return &cpu::AttendAvx512;
  if (isa >= cpu::CpuIsa::kAvx2) return &cpu::AttendAvx2;
#endif
  return &cpu::AttendPortable;
}

// A tile: up to kAttentionRowTile query rows of one sequence, for one KV head and the query heads that share it.
struct AttentionTile {
  int32_t sequence;
  int32_t first_row;
  int32_t num_rows;
  int32_t first_position;
  int32_t kv_head;
};

// One work item: the keys [key_begin, key_end) of a tile's context. A tile whose context spans several chunks
// (split decoding) leaves each chunk's unnormalised state in the partial states at `partial_offset` for
// MergeChunks; a tile of one chunk (partial_offset -1) writes its rows straight to the output.
// An item of `heads` > 1 walks the KV heads of tiles tile .. tile + heads - 1 (the same rows) together, their
// partial states partial_head_stride floats apart.
struct AttentionItem {
  int32_t tile;
  int32_t key_begin;
  int32_t key_end;
  bool first_chunk;  // the tile's sinks enter the softmax once, in its first chunk
  int64_t partial_offset;
  int32_t heads = 1;
  int64_t partial_head_stride = 0;
  // > 1: the item attends its tile's chunks one after another and merges them itself (a prefill tile: its states
  // stay in the member's scratch instead of a buffer the size of every tile's states).
  int32_t chunks_in_item = 1;
};

// Decode rows over a context of at least this many chunks per thread walk all their KV heads in one item: one
// item then reads whole cache rows ([kv_heads][head_dim], 2 KB for Qwen3) in order, where an item per head read a
// 256-byte slice of every row, which got half the memory bandwidth (AMD Zen 4: 18 against 35 GB/s on 2 threads).
// Shorter contexts keep an item per head, enough of them to balance the threads.
constexpr int64_t kWalkHeadsChunksPerThread = 2;
constexpr int64_t kWalkHeadsMaxRows = 4;

// A tile split into `chunks` chunks, whose states start at `partial_offset`.
struct SplitTile {
  int64_t tile;
  int64_t chunks;
  int64_t partial_offset;
};

// One chunk's unnormalised state of a tile's queries (AttentionArgs::partial): sums, then maxima, then weight sums.
int64_t ChunkStateFloats(const AttentionTile& tile, int64_t group, int64_t head_dim) {
  return tile.num_rows * group * (head_dim + 2);
}

// Out = the softmax-weighted sum over all chunks of a tile: each chunk's sums rescaled to the largest maximum.
void MergeChunks(const AttentionTile& tile, const float* partials, int64_t chunks, int64_t group, int64_t num_heads,
                 int64_t head_dim, bool bf16, void* out) {
  const int64_t queries = tile.num_rows * group, chunk_floats = ChunkStateFloats(tile, group, head_dim);
  float merged[kMaxHeadDim];
  for (int64_t index = 0; index < queries; ++index) {
    float maximum = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < chunks; ++c) {
      maximum = std::max(maximum, partials[c * chunk_floats + queries * head_dim + index]);
    }
    std::fill(merged, merged + head_dim, 0.0f);
    float sum = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      const float* chunk = partials + c * chunk_floats;
      const float chunk_sum = chunk[queries * head_dim + queries + index];
      if (chunk_sum == 0.0f) continue;  // the row saw no key of this chunk (its maximum is -inf)
      const float weight = std::exp(chunk[queries * head_dim + index] - maximum);
      sum += chunk_sum * weight;
      for (int64_t d = 0; d < head_dim; ++d) merged[d] += chunk[index * head_dim + d] * weight;
    }
    const float inverse = 1.0f / sum;
    const int64_t row = tile.first_row + index / group, head = tile.kv_head * group + index % group;
    const int64_t offset = (row * num_heads + head) * head_dim;
    if (bf16) {
      auto* dst = static_cast<c10::BFloat16*>(out) + offset;
      for (int64_t d = 0; d < head_dim; ++d) dst[d] = c10::BFloat16(merged[d] * inverse);
    } else {
      auto* dst = static_cast<float*>(out) + offset;
      for (int64_t d = 0; d < head_dim; ++d) dst[d] = merged[d] * inverse;
    }
  }
}

// Items are independent; the team takes them from a shared counter, the most keys first, so a long prefill's
// last items do not leave one thread working alone at the end. Then the split tiles are merged.
void AttendTiles(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                 const at::Tensor& block_tables, const std::vector<AttentionTile>& tiles, float scale, int64_t window,
                 const float* sinks, int64_t chunk_tokens, at::Tensor& out) {
  const int64_t num_heads = query.size(1), head_dim = query.size(2);
  const int64_t block_size = key_cache.size(1), num_kv_heads = key_cache.size(2);
  const int64_t group = num_heads / num_kv_heads;
  // Chunks of whole blocks, from the first block any row of the tile sees.
  const int64_t chunk = std::max<int64_t>(1, chunk_tokens / block_size) * block_size;
  std::vector<AttentionItem> items;
  std::vector<SplitTile> split_tiles;
  int64_t partial_floats = 0;
  const int64_t walk_min_chunks = kWalkHeadsChunksPerThread * std::max(1, at::get_num_threads());
  // Tiles come in row groups: one per KV head, in head order, for the same rows.
  for (size_t group_begin = 0; group_begin < tiles.size(); group_begin += static_cast<size_t>(num_kv_heads)) {
    const AttentionTile& tile = tiles[group_begin];
    const int64_t context = tile.first_position + tile.num_rows;
    const int64_t begin = window > 0 ? std::max<int64_t>(0, tile.first_position - window + 1) / chunk * chunk : 0;
    const int64_t chunks = (context - begin + chunk - 1) / chunk;
    const int64_t state_floats = ChunkStateFloats(tile, group, head_dim);
    if (chunks > 1 && tile.num_rows > kWalkHeadsMaxRows) {
      for (int64_t h = 0; h < num_kv_heads; ++h) {
        items.push_back({static_cast<int32_t>(group_begin + h), static_cast<int32_t>(begin),
                         static_cast<int32_t>(context), true, int64_t{-1}, 1, 0, static_cast<int32_t>(chunks)});
      }
      continue;
    }
    const int64_t group_partials = partial_floats;
    for (int64_t h = 0; h < num_kv_heads; ++h) {
      if (chunks > 1) {
        split_tiles.push_back({static_cast<int64_t>(group_begin + h), chunks, partial_floats});
        partial_floats += chunks * state_floats;
      }
    }
    const bool walk_heads = num_kv_heads > 1 && chunks >= walk_min_chunks && tile.num_rows <= kWalkHeadsMaxRows;
    const int64_t heads_per_item = walk_heads ? cpu::kAttentionMaxWalkHeads : 1;
    for (int64_t h = 0; h < num_kv_heads; h += heads_per_item) {
      const int32_t heads = static_cast<int32_t>(std::min(heads_per_item, num_kv_heads - h));
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t key_begin = begin + c * chunk;
        items.push_back({static_cast<int32_t>(group_begin + h), static_cast<int32_t>(key_begin),
                         static_cast<int32_t>(std::min(context, key_begin + chunk)), c == 0,
                         chunks > 1 ? group_partials + h * chunks * state_floats + c * state_floats : int64_t{-1},
                         heads, chunks * state_floats});
      }
    }
  }
  std::vector<float> partials(partial_floats);
  // The most work first; then a context's chunks in order, so the members read the cache forwards together.
  std::sort(items.begin(), items.end(), [&](const AttentionItem& a, const AttentionItem& b) {
    const int64_t a_size = static_cast<int64_t>(a.key_end - a.key_begin) * tiles[a.tile].num_rows * a.heads;
    const int64_t b_size = static_cast<int64_t>(b.key_end - b.key_begin) * tiles[b.tile].num_rows * b.heads;
    if (a_size != b_size) return a_size > b_size;
    if (a.key_begin != b.key_begin) return a.key_begin < b.key_begin;
    return a.tile < b.tile;
  });
  const AttendKernel kernel = SelectAttendKernel();
  const int64_t scratch_floats = cpu::AttentionScratchFloats(
      group, head_dim, block_size, std::min<int64_t>(num_kv_heads, cpu::kAttentionMaxWalkHeads));
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  const int64_t max_blocks = block_tables.size(1);
  const bool bf16 = query.scalar_type() == at::kBFloat16;
  // One share that every member takes from the front: the items go out largest first, which balances the
  // members better than contiguous shares would (there is no weight stream to keep contiguous here).
  cpu::WorkQueue queue(static_cast<int64_t>(items.size()), /*members=*/1);
  cpu::ThreadTeam::Get().Run([&](cpu::TeamMember& member) {
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < scratch_floats) scratch.resize(scratch_floats);
    thread_local std::vector<float> tile_partials;
    for (auto [i, end] = queue.Claim(member, 1); i < end; std::tie(i, end) = queue.Claim(member, 1)) {
      const AttentionItem& item = items[i];
      const AttentionTile& tile = tiles[item.tile];
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
                              bf16,
                              scratch.data(),
                              item.first_chunk ? sinks : nullptr,
                              item.key_begin,
                              item.key_end,
                              item.partial_offset < 0 ? nullptr : partials.data() + item.partial_offset,
                              item.heads,
                              item.partial_head_stride};
      if (item.chunks_in_item == 1) {
        kernel(args);
        continue;
      }
      // The same chunks, states and merge as split items, one after another.
      const int64_t state_floats = ChunkStateFloats(tile, group, head_dim);
      if (static_cast<int64_t>(tile_partials.size()) < item.chunks_in_item * state_floats) {
        tile_partials.resize(item.chunks_in_item * state_floats);
      }
      for (int64_t c = 0; c < item.chunks_in_item; ++c) {
        args.key_begin = item.key_begin + c * chunk;
        args.key_end = std::min<int64_t>(item.key_end, args.key_begin + chunk);
        args.sinks = c == 0 ? sinks : nullptr;
        args.partial = tile_partials.data() + c * state_floats;
        kernel(args);
      }
      MergeChunks(tile, tile_partials.data(), item.chunks_in_item, group, num_heads, head_dim, bf16, out.data_ptr());
    }
    if (split_tiles.empty()) return;
    member.Barrier();
    const auto [first, last] = member.Share(static_cast<int64_t>(split_tiles.size()));
    for (int64_t s = first; s < last; ++s) {
      const SplitTile& split = split_tiles[s];
      MergeChunks(tiles[split.tile], partials.data() + split.partial_offset, split.chunks, group, num_heads, head_dim,
                  bf16, out.data_ptr());
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

at::Tensor PagedAttentionCpu(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                             const at::Tensor& block_tables, const at::Tensor& seq_lens,
                             const at::Tensor& query_start_locs, double scale, int64_t window,
                             const c10::optional<at::Tensor>& sinks) {
  // Every context in chunks, whatever the model: a decode row then keeps every thread busy (Gemma 3's one KV head),
  // and over a long context each item walks all the row's KV heads through whole cache rows (AttendTiles).
  return PagedAttentionCpuInChunks(query, key_cache, value_cache, block_tables, seq_lens, query_start_locs, scale,
                                   window, sinks, kAttentionChunkTokens);
}

at::Tensor PagedAttentionCpuInChunks(const at::Tensor& query_in, const at::Tensor& key_cache_in,
                                     const at::Tensor& value_cache_in, const at::Tensor& block_tables_in,
                                     const at::Tensor& seq_lens_in, const at::Tensor& query_start_locs_in, double scale,
                                     int64_t window, const c10::optional<at::Tensor>& sinks_in, int64_t chunk_tokens) {
  TORCH_CHECK(chunk_tokens > 0, "paged_attention: chunks must hold at least one token");
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
  TORCH_CHECK(query.size(2) <= kMaxHeadDim, "paged_attention: head_dim above ", kMaxHeadDim);
  at::Tensor out = cpu::RecycledEmpty(cpu::kAttentionOutput, query.sizes(), query.scalar_type());
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
                has_sinks ? sinks.data_ptr<float>() : nullptr, chunk_tokens, out);
  }
  return out;
}

bool EnsurePagedAttentionOpsRegistered() {
#ifdef LLMC_WITH_CUDA
  return EnsurePagedAttentionCudaRegistered();
#else
  return true;
#endif
}

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
