#include "worker/engine/block_allocator.h"

#include "absl/base/internal/raw_logging.h"

namespace llmc::engine {

BlockAllocator::BlockAllocator(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t block = num_blocks - 1; block >= 0; --block) free_.push_back(block);
}

bool BlockAllocator::Allocate(int32_t count, std::vector<int32_t>& table) {
  if (count > num_free()) return false;
  for (int32_t i = 0; i < count; ++i) {
    const int32_t block = free_.back();
    free_.pop_back();
    ref_counts_[block] = 1;
    table.push_back(block);
  }
  return true;
}

void BlockAllocator::Release(std::vector<int32_t>& table) {
  for (const int32_t block : table) {
    ABSL_RAW_CHECK(ref_counts_[block] > 0, "KV block released twice");
    if (--ref_counts_[block] == 0) free_.push_back(block);
  }
  table.clear();
}

}  // namespace llmc::engine
