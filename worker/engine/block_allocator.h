#ifndef LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_
#define LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace llmc::engine {

// The hashes that find a cached block's candidates, chained over a prompt's full blocks: a block's is of
// its tokens after the block whose hash is `parent_hash` (RootBlockHash(cache_salt) for a prompt's first
// block). Deterministic across processes and builds (absl::Hash is seeded per process), so runs and tests
// reproduce. Only hints: a lookup checks the candidate's identity, so a collision costs at most a cache
// miss, never another prompt's K/V.
uint64_t BlockHash(uint64_t parent_hash, absl::Span<const int32_t> tokens);
uint64_t RootBlockHash(absl::string_view salt);
using BlockHashFunction = uint64_t (*)(uint64_t parent_hash, absl::Span<const int32_t> tokens);

// A cached block's identity: a number given to one registration of one block, never given again in the
// process (so a block evicted and cached again has another). kNoBlockId: none (not cached), and the parent
// of a prompt's first block.
using BlockId = uint64_t;
inline constexpr BlockId kNoBlockId = 0;

// What a sequence knows of one of its full blocks: the chained hash of its contents, and the identity under
// which the cache holds them (kNoBlockId: not known to be cached).
struct BlockKey {
  uint64_t hash = 0;
  BlockId id = kNoBlockId;
};

// Hands out the fixed blocks of the KV cache, reference-counted so that sequences share the blocks of a
// common prefix (prefix caching). A full, computed block can be registered as holding its tokens after a
// parent: the cached block holding the tokens before them (by identity, not by a hash of its contents), or,
// for a prompt's first block, the start of a prompt under a cache salt (the tenant; "" for none). When its
// last reference goes, it stays cached in the free list until the allocator needs the block again, least
// recently freed first. Engine thread only.
class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Blocks no sequence holds, cached ones included (they are taken back when needed).
  int32_t num_free() const { return num_free_; }
  int32_t num_used() const { return num_blocks() - num_free(); }
  int64_t num_cached() const { return static_cast<int64_t>(cached_.size()); }
  int64_t num_evicted() const { return num_evicted_; }

  // Appends `count` blocks to `table`; false (and nothing taken) when fewer than `count` are free.
  bool Allocate(int32_t count, std::vector<int32_t>& table);
  // Drops one reference to each block of `table` and clears it. The table's last blocks are freed first,
  // so a sequence's prefix outlives its tail in the cache.
  void Release(std::vector<int32_t>& table);

  // One more holder for `block`, which is held already (n > 1 choices sharing their prompt's blocks).
  void Share(int32_t block);
  int32_t ref_count(int32_t block) const { return blocks_[block].ref_count; }
  // The identity `block` is cached under; kNoBlockId when it is not cached.
  BlockId id(int32_t block) const { return blocks_[block].id; }

  // The cached block holding `tokens` after the cached block `parent` (kNoBlockId: at the start of a prompt
  // salted with `salt`; `salt` is not read otherwise), found under `hash` (their chained hash); it gains a
  // reference. nullopt on a miss. O(tokens + salt): the one candidate's parent, salt and tokens are compared.
  std::optional<int32_t> TakeCached(uint64_t hash, BlockId parent, absl::string_view salt,
                                    absl::Span<const int32_t> tokens);
  // Registers `block` (full and computed, held by the caller) as holding `tokens` after `parent` (as for
  // TakeCached), under `hash`, and returns the identity under which those contents are cached: the block's
  // own, or that of the block cached with the same contents before it. kNoBlockId when they cannot be cached
  // because another block in use holds the slot of `hash` (a collision); a free block cached with other
  // contents under it gives the slot up.
  BlockId Cache(int32_t block, uint64_t hash, BlockId parent, absl::string_view salt, absl::Span<const int32_t> tokens);

 private:
  static constexpr int32_t kNone = -1;
  struct Block {
    int32_t ref_count = 0;
    int32_t prev = kNone, next = kNone;  // in the free list
    BlockId id = kNoBlockId;             // set while cached
    BlockId parent = kNoBlockId;
    uint64_t hash = 0;
    std::string salt;             // a cached first block's
    std::vector<int32_t> tokens;  // a cached block's
  };

  bool Holds(const Block& entry, BlockId parent, absl::string_view salt, absl::Span<const int32_t> tokens) const;
  void Uncache(Block& entry);
  void Unlink(int32_t block);
  void PushFree(int32_t block);

  std::vector<Block> blocks_;
  int32_t head_ = kNone, tail_ = kNone;  // free list: taken from the head, freed to the tail
  int32_t num_free_ = 0;
  int64_t num_evicted_ = 0;
  BlockId next_id_ = 1;
  absl::flat_hash_map<uint64_t, int32_t> cached_;  // hash → the one block cached under it
};

// Blocks needed to hold `num_tokens` tokens.
inline int32_t BlocksFor(int64_t num_tokens, int64_t block_size) {
  return static_cast<int32_t>((num_tokens + block_size - 1) / block_size);
}

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_
