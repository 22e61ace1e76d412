#ifndef LLMC_WORKER_ENGINE_SCHEDULER_H_
#define LLMC_WORKER_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "worker/engine/block_allocator.h"
#include "worker/engine/sequence.h"

namespace llmc::engine {

struct SchedulerLimits {
  int64_t block_size = 16;
  int64_t max_num_batched_tokens = 512;  // tokens in one step: decode tokens plus prefill chunks
  int64_t max_running = 32;
};

// One sequence's share of a step: its next `num_tokens` uncomputed tokens.
struct ScheduledChunk {
  Sequence* sequence = nullptr;
  int64_t num_tokens = 0;
  bool samples = false;  // the chunk reaches the end of the sequence, so a token is sampled after it
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // running sequences first (oldest first), then new admissions
  std::vector<Sequence*> preempted;    // sent back to waiting this step, blocks freed
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

// Decides what each step computes (ARCHITECTURE.md §3). Running sequences go first, oldest first, each with
// its decode token or next prefill chunk; then waiting sequences are admitted first come, first served while
// the token budget, the running limit and free blocks allow. A long prompt is split into chunks across
// steps, so it never holds running streams back for more than one chunk. When a running sequence needs a
// block and none is free, the newest running sequence is preempted: its blocks are freed and it waits at the
// front of the queue to recompute later. Engine thread only.
class Scheduler {
 public:
  Scheduler(BlockAllocator& allocator, const SchedulerLimits& limits) : allocator_(allocator), limits_(limits) {}

  void AddWaiting(Sequence* sequence);
  // Takes a sequence out of the queue or the batch (finished, cancelled, failed) and frees its blocks.
  void Remove(Sequence* sequence);
  SchedulerOutput Schedule();

  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const BlockAllocator& allocator() const { return allocator_; }

 private:
  void Preempt(Sequence* sequence, SchedulerOutput& output);
  void InsertRunning(Sequence* sequence);

  BlockAllocator& allocator_;
  const SchedulerLimits limits_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // by arrival (request id, choice), oldest first
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SCHEDULER_H_
