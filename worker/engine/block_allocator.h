#ifndef LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_
#define LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace llmc::engine {

// Hands out the fixed blocks of the KV cache, reference-counted so that sequences share the blocks of a
// common prefix (prefix caching). A full, computed block can be registered under the chained hash of its
// tokens; when its last reference goes, it stays cached in the free list until the allocator needs the
// block again, least recently freed first. Engine thread only.
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

  // The block cached under `hash` if it holds `tokens` after a block cached under `parent_hash`; it gains a
  // reference. nullopt on a miss.
  std::optional<int32_t> TakeCached(uint64_t hash, uint64_t parent_hash, absl::Span<const int32_t> tokens);
  // Registers `block` (full and computed, held by the caller) under `hash`, unless a block is cached under
  // it already.
  void Cache(int32_t block, uint64_t hash, uint64_t parent_hash, absl::Span<const int32_t> tokens);

 private:
  static constexpr int32_t kNone = -1;
  struct Block {
    int32_t ref_count = 0;
    int32_t prev = kNone, next = kNone;  // in the free list
    bool cached = false;
    uint64_t hash = 0, parent_hash = 0;
    std::vector<int32_t> tokens;  // a cached block's, to tell a hash collision from a hit
  };

  void Unlink(int32_t block);
  void PushFree(int32_t block);

  std::vector<Block> blocks_;
  int32_t head_ = kNone, tail_ = kNone;  // free list: taken from the head, freed to the tail
  int32_t num_free_ = 0;
  int64_t num_evicted_ = 0;
  absl::flat_hash_map<uint64_t, int32_t> cached_;
};

// Blocks needed to hold `num_tokens` tokens.
inline int32_t BlocksFor(int64_t num_tokens, int64_t block_size) {
  return static_cast<int32_t>((num_tokens + block_size - 1) / block_size);
}

// The chained hash of a full block: its tokens after the block whose hash is `parent_hash` (kRootBlockHash
// for the first block).
inline constexpr uint64_t kRootBlockHash = 0x6c6c6d632d6b7631ULL;
uint64_t BlockHash(uint64_t parent_hash, absl::Span<const int32_t> tokens);

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_
