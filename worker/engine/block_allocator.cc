#include "worker/engine/block_allocator.h"

#include <algorithm>

#include "absl/base/internal/raw_logging.h"
#include "common/prefix_hash.h"

namespace llmc::engine {

namespace {

uint64_t RotateLeft(uint64_t value, int bits) { return (value << bits) | (value >> (64 - bits)); }

}  // namespace

uint64_t BlockHash(uint64_t parent_hash, absl::Span<const int32_t> tokens) {
  uint64_t hash = MixBits(parent_hash ^ (tokens.size() * 0x9e3779b97f4a7c15ULL));
  for (const int32_t token : tokens) {
    uint64_t word = static_cast<uint32_t>(token) * 0x87c37b91114253d5ULL;
    word = RotateLeft(word, 31) * 0x4cf5ad432745937fULL;
    hash = RotateLeft(hash ^ word, 27) * 5 + 0x52dce729;
  }
  return MixBits(hash);
}

uint64_t RootBlockHash(absl::string_view salt) {
  constexpr uint64_t kRoot = 0x6c6c6d632d6b7631ULL;
  if (salt.empty()) return kRoot;
  uint64_t hash = kRoot;
  for (const char byte : salt) hash = (hash ^ static_cast<unsigned char>(byte)) * 0x100000001b3ULL;
  return MixBits(hash ^ salt.size());
}

BlockAllocator::BlockAllocator(int32_t num_blocks) : blocks_(num_blocks) {
  for (int32_t block = 0; block < num_blocks; ++block) PushFree(block);
}

bool BlockAllocator::Holds(const Block& entry, BlockId parent, absl::string_view salt,
                           absl::Span<const int32_t> tokens) const {
  return entry.id != kNoBlockId && entry.parent == parent && (parent != kNoBlockId || entry.salt == salt) &&
         std::equal(tokens.begin(), tokens.end(), entry.tokens.begin(), entry.tokens.end());
}

void BlockAllocator::Uncache(Block& entry) {
  cached_.erase(entry.hash);
  entry.id = entry.parent = kNoBlockId;
  std::string().swap(entry.salt);
  std::vector<int32_t>().swap(entry.tokens);
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
    if (entry.id != kNoBlockId) {
      Uncache(entry);
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

std::optional<int32_t> BlockAllocator::TakeCached(uint64_t hash, BlockId parent, absl::string_view salt,
                                                  absl::Span<const int32_t> tokens) {
  const auto found = cached_.find(hash);
  if (found == cached_.end() || !Holds(blocks_[found->second], parent, salt, tokens)) return std::nullopt;
  if (blocks_[found->second].ref_count++ == 0) Unlink(found->second);
  return found->second;
}

void BlockAllocator::Share(int32_t block) {
  ABSL_RAW_CHECK(blocks_[block].ref_count > 0, "sharing a free KV block");
  ++blocks_[block].ref_count;
}

BlockId BlockAllocator::Cache(int32_t block, uint64_t hash, BlockId parent, absl::string_view salt,
                              absl::Span<const int32_t> tokens) {
  Block& entry = blocks_[block];
  ABSL_RAW_CHECK(entry.ref_count > 0, "caching a free KV block");
  if (entry.id != kNoBlockId) return entry.id;
  if (const auto found = cached_.find(hash); found != cached_.end()) {
    Block& holder = blocks_[found->second];
    if (Holds(holder, parent, salt, tokens)) return holder.id;  // the same contents, cached first
    if (holder.ref_count > 0) return kNoBlockId;  // a collision with a block in use: this one stays uncached
    Uncache(holder);                              // a collision with a free block: it stays free, uncached
  }
  cached_.emplace(hash, block);
  entry.id = next_id_++;
  entry.parent = parent;
  entry.hash = hash;
  if (parent == kNoBlockId) entry.salt.assign(salt.data(), salt.size());
  entry.tokens.assign(tokens.begin(), tokens.end());
  return entry.id;
}

}  // namespace llmc::engine
