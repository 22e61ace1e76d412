#include "worker/engine/block_allocator.h"

#include <algorithm>

#include "absl/base/internal/raw_logging.h"
#include "common/prefix_hash.h"

namespace llmc::engine {

namespace {

uint64_t RotateLeft(uint64_t value, int bits) { return (value << bits) | (value >> (64 - bits)); }

}  // namespace

// Deterministic across processes and builds (absl::Hash is seeded per process), so runs and tests
// reproduce.
uint64_t BlockHash(uint64_t parent_hash, absl::Span<const int32_t> tokens) {
  uint64_t hash = MixBits(parent_hash ^ (tokens.size() * 0x9e3779b97f4a7c15ULL));
  for (const int32_t token : tokens) {
    uint64_t word = static_cast<uint32_t>(token) * 0x87c37b91114253d5ULL;
    word = RotateLeft(word, 31) * 0x4cf5ad432745937fULL;
    hash = RotateLeft(hash ^ word, 27) * 5 + 0x52dce729;
  }
  return MixBits(hash);
}

BlockAllocator::BlockAllocator(int32_t num_blocks) : blocks_(num_blocks) {
  for (int32_t block = 0; block < num_blocks; ++block) PushFree(block);
}

void BlockAllocator::Unlink(int32_t block) {
  Block& entry = blocks_[block];
  (entry.prev == kNone ? head_ : blocks_[entry.prev].next) = entry.next;
  (entry.next == kNone ? tail_ : blocks_[entry.next].prev) = entry.prev;
  entry.prev = entry.next = kNone;
  --num_free_;
}

void BlockAllocator::PushFree(int32_t block) {
  Block& entry = blocks_[block];
  entry.prev = tail_;
  entry.next = kNone;
  (tail_ == kNone ? head_ : blocks_[tail_].next) = block;
  tail_ = block;
  ++num_free_;
}

bool BlockAllocator::Allocate(int32_t count, std::vector<int32_t>& table) {
  if (count > num_free_) return false;
  for (int32_t i = 0; i < count; ++i) {
    const int32_t block = head_;
    Unlink(block);
    Block& entry = blocks_[block];
    if (entry.cached) {
      cached_.erase(entry.hash);
      entry.cached = false;
      std::vector<int32_t>().swap(entry.tokens);
      ++num_evicted_;
    }
    entry.ref_count = 1;
    table.push_back(block);
  }
  return true;
}

void BlockAllocator::Release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    ABSL_RAW_CHECK(blocks_[*it].ref_count > 0, "KV block released twice");
    if (--blocks_[*it].ref_count == 0) PushFree(*it);
  }
  table.clear();
}

std::optional<int32_t> BlockAllocator::TakeCached(uint64_t hash, uint64_t parent_hash,
                                                  absl::Span<const int32_t> tokens) {
  const auto found = cached_.find(hash);
  if (found == cached_.end()) return std::nullopt;
  Block& entry = blocks_[found->second];
  if (entry.parent_hash != parent_hash ||
      !std::equal(tokens.begin(), tokens.end(), entry.tokens.begin(), entry.tokens.end())) {
    return std::nullopt;
  }
  if (entry.ref_count++ == 0) Unlink(found->second);
  return found->second;
}

void BlockAllocator::Share(int32_t block) {
  ABSL_RAW_CHECK(blocks_[block].ref_count > 0, "sharing a free KV block");
  ++blocks_[block].ref_count;
}

void BlockAllocator::Cache(int32_t block, uint64_t hash, uint64_t parent_hash, absl::Span<const int32_t> tokens) {
  Block& entry = blocks_[block];
  ABSL_RAW_CHECK(entry.ref_count > 0, "caching a free KV block");
  if (entry.cached || !cached_.try_emplace(hash, block).second) return;
  entry.cached = true;
  entry.hash = hash;
  entry.parent_hash = parent_hash;
  entry.tokens.assign(tokens.begin(), tokens.end());
}

}  // namespace llmc::engine
