#ifndef LLMC_WORKER_ENGINE_PREFIX_CACHE_H_
#define LLMC_WORKER_ENGINE_PREFIX_CACHE_H_

#include <cstdint>

#include "worker/engine/block_allocator.h"
#include "worker/engine/sequence.h"

namespace llmc::engine {

// The scheduler's prefix caching: full KV blocks stay cached under their tokens after their parent block
// (block_allocator.h: by identity, with the request's cache salt), and a sequence that holds no blocks
// starts after the longest run of cached blocks that holds its first tokens. The later choices of a
// request share choice 0's computed prompt instead. Disabled, every call does nothing. Engine thread only.
class PrefixCache {
 public:
  // `block_hash` chains the blocks' hashes (tests inject colliding ones).
  PrefixCache(BlockAllocator& allocator, int64_t block_size, bool enabled, BlockHashFunction block_hash)
      : allocator_(allocator), block_size_(block_size), enabled_(enabled), block_hash_(block_hash) {}

  bool enabled() const { return enabled_; }
  // Gives a sequence that holds no blocks the cached blocks of its longest cached prefix (at least its last
  // token is left to compute, for its logits), and sets num_computed after them.
  void TakeCachedPrefix(Sequence& sequence);
  // A later choice whose choice 0 holds the computed prompt shares all its prompt blocks instead, the
  // partial last one included, and computes only the last prompt token.
  void SharePromptOfChoiceZero(Sequence& sequence);
  // An admitted prompt's lookup: adds to `queries` and `hits` (prompt tokens looked up and found) and
  // notes the sequence's cached prompt tokens.
  void CountLookup(Sequence& sequence, int64_t& queries, int64_t& hits) const;
  // Caches the blocks that `num_tokens` newly computed tokens of `sequence` filled.
  void CacheFilledBlocks(Sequence& sequence, int64_t num_tokens);

 private:
  // `sequence`'s block keys up to its first `num_blocks` full blocks.
  void ExtendBlockKeys(Sequence& sequence, int64_t num_blocks) const;
  // The identity under which the cache holds the contents of `sequence`'s full block k (its own block's,
  // else the one Sequence::block_hashes noted); kNoBlockId when they are not cached.
  BlockId CachedId(const Sequence& sequence, int64_t k) const;

  BlockAllocator& allocator_;
  const int64_t block_size_;
  const bool enabled_;
  const BlockHashFunction block_hash_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_PREFIX_CACHE_H_
