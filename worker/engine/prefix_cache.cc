#include "worker/engine/prefix_cache.h"

#include <optional>

#include "absl/types/span.h"

namespace llmc::engine {

void PrefixCache::ExtendBlockKeys(Sequence& sequence, int64_t num_blocks) const {
  for (int64_t k = static_cast<int64_t>(sequence.block_hashes.size()); k < num_blocks; ++k) {
    const uint64_t parent =
        k == 0 ? RootBlockHash(sequence.group.request.cache_salt) : sequence.block_hashes[k - 1].hash;
    sequence.block_hashes.push_back(
        {block_hash_(parent, absl::MakeConstSpan(sequence.tokens).subspan(k * block_size_, block_size_)), kNoBlockId});
  }
}

BlockId PrefixCache::CachedId(const Sequence& sequence, int64_t k) const {
  const BlockId own = allocator_.id(sequence.block_table[k]);
  return own != kNoBlockId ? own : sequence.block_hashes[k].id;
}

void PrefixCache::TakeCachedPrefix(Sequence& sequence) {
  if (!enabled_ || !sequence.block_table.empty() || !sequence.may_use_cached_prefix()) return;
  const auto tokens = absl::MakeConstSpan(sequence.tokens);
  const absl::string_view salt = sequence.group.request.cache_salt;
  // The last token is always computed: its logits give the next token.
  const int64_t num_blocks = (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  BlockId parent = kNoBlockId;
  for (int64_t k = 0; k < num_blocks; ++k) {
    ExtendBlockKeys(sequence, k + 1);
    BlockKey& key = sequence.block_hashes[k];
    const std::optional<int32_t> block =
        allocator_.TakeCached(key.hash, parent, salt, tokens.subspan(k * block_size_, block_size_));
    if (!block.has_value()) break;
    sequence.block_table.push_back(*block);
    parent = key.id = allocator_.id(*block);
  }
  sequence.num_computed = static_cast<int64_t>(sequence.block_table.size()) * block_size_;
}

void PrefixCache::SharePromptOfChoiceZero(Sequence& sequence) {
  if (!enabled_ || sequence.choice_index == 0 || sequence.num_output() > 0 || !sequence.may_use_cached_prefix()) {
    return;
  }
  const Sequence& first = *sequence.group.sequences.front();
  const int32_t prompt_blocks = BlocksFor(sequence.prompt_length, block_size_);
  if (first.finished() || first.num_computed < first.prompt_length ||
      static_cast<int32_t>(first.block_table.size()) < prompt_blocks) {
    return;
  }
  allocator_.Release(sequence.block_table);
  for (int32_t k = 0; k < prompt_blocks; ++k) {
    allocator_.Share(first.block_table[k]);
    sequence.block_table.push_back(first.block_table[k]);
  }
  // Choice 0 may have written its output past the prompt in the last block: this choice overwrites those
  // positions (in its own copy) before it reads them.
  sequence.num_computed = sequence.prompt_length - 1;
}

void PrefixCache::CountLookup(Sequence& sequence, int64_t& queries, int64_t& hits) const {
  // Prompts only: a preempted sequence with output recomputes its own tokens, cached or not.
  if (!enabled_ || !sequence.may_use_cached_prefix() || sequence.num_output() > 0) return;
  queries += sequence.prompt_length;
  hits += sequence.num_computed;
  sequence.num_cached_prompt_tokens = sequence.num_computed;
}

void PrefixCache::CacheFilledBlocks(Sequence& sequence, int64_t num_tokens) {
  if (!enabled_) return;
  const int64_t filled = sequence.num_computed / block_size_;
  ExtendBlockKeys(sequence, filled);
  const auto tokens = absl::MakeConstSpan(sequence.tokens);
  const absl::string_view salt = sequence.group.request.cache_salt;
  for (int64_t k = (sequence.num_computed - num_tokens) / block_size_; k < filled; ++k) {
    // Contents are cached after their parent's by identity: those whose parent is not cached cannot be
    // (nor can anything after them).
    const BlockId parent = k == 0 ? kNoBlockId : CachedId(sequence, k - 1);
    if (k > 0 && parent == kNoBlockId) break;
    BlockKey& key = sequence.block_hashes[k];
    key.id =
        allocator_.Cache(sequence.block_table[k], key.hash, parent, salt, tokens.subspan(k * block_size_, block_size_));
  }
}

}  // namespace llmc::engine
