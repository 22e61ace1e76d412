#ifndef LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_
#define LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <vector>

namespace llmc::engine {

// Hands out the fixed blocks of the KV cache. Blocks carry a reference count so that sequences can later
// share the blocks of a common prompt prefix (prefix caching); today each block has one owner. Engine
// thread only.
class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }

  // Appends `count` blocks to `table`; false (and nothing taken) when fewer than `count` are free.
  bool Allocate(int32_t count, std::vector<int32_t>& table);
  // Drops one reference to each block of `table` and clears it.
  void Release(std::vector<int32_t>& table);

 private:
  std::vector<int32_t> free_;  // a stack: recently freed blocks are reused first (warm in cache)
  std::vector<int32_t> ref_counts_;
};

// Blocks needed to hold `num_tokens` tokens.
inline int32_t BlocksFor(int64_t num_tokens, int64_t block_size) {
  return static_cast<int32_t>((num_tokens + block_size - 1) / block_size);
}

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_BLOCK_ALLOCATOR_H_
