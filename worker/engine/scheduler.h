#ifndef LLMC_WORKER_ENGINE_SCHEDULER_H_
#define LLMC_WORKER_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "common/engine_limits.h"
#include "worker/engine/block_allocator.h"
#include "worker/engine/prefix_cache.h"
#include "worker/engine/sequence.h"

namespace llmc::engine {

struct SchedulerLimits {
  int64_t block_size = kDefaultEngineLimits.block_size;
  int64_t max_num_batched_tokens = kDefaultEngineLimits.max_num_batched_tokens;  // decode tokens + prefill chunks
  int64_t max_running = kDefaultEngineLimits.max_running;
  // Full blocks are kept as their tokens after their parent block (block_allocator.h) and shared by later
  // sequences with the same prefix and cache salt.
  bool enable_prefix_caching = false;
};

// One sequence's share of a step: its next `num_tokens` uncomputed tokens.
struct ScheduledChunk {
  Sequence* sequence = nullptr;
  int64_t num_tokens = 0;
  bool samples = false;  // the chunk reaches the end of the sequence, so a token is sampled after it
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // decodes (oldest first), then prefill chunks, then new admissions
  std::vector<Sequence*> preempted;    // sent back to waiting this step, blocks freed
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  // Prefix cache lookups of this step's admitted prompts: the prompt tokens looked up and those found.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  // Copy-on-write: KV blocks to copy (from, to) before the step's forward pass, because a chunk writes into
  // a block another sequence shares.
  std::vector<std::pair<int32_t, int32_t>> block_copies;
  bool empty() const { return chunks.empty(); }
};

// Prompt logprobs need a full logits row per prompt position: a step computes at most this many.
inline constexpr int64_t kMaxPromptLogprobRowsPerStep = 128;

// Decides what each step computes (docs/engine.md), in three passes over the token budget:
//  1. every running sequence that is decoding gets its one token, oldest first;
//  2. running sequences still prefilling (new prompts, or recomputes after a preemption) get the next chunk
//     the remaining budget and the free blocks allow, oldest first, leaving free the blocks the decoders
//     will need for their next token;
//  3. waiting sequences are admitted first come, first served while the budget, the running limit and the
//     free blocks allow.
// So a long prefill or a recompute never takes a decoder's token, and a long prompt holds running streams
// back by at most one chunk. When a decoder needs a block and none is free, the newest running sequence is
// preempted: its blocks are freed and it waits in the queue (kept in arrival order), to be recomputed in chunks like
// any prefill, never readmitted in the step that preempted it. With prefix caching, an admitted sequence
// starts after the longest run of cached full blocks that holds its first tokens (at least one token is
// always computed, for its logits), and blocks are cached as they fill; the later choices of a request wait
// for choice 0's first token, then share all of its prompt's blocks, the partial last one included, and
// compute only the last prompt token. A chunk that would write into a block someone else holds writes
// into a copy (copy-on-write, SchedulerOutput::block_copies). Engine thread only.
class Scheduler {
 public:
  // `block_hash` chains the prefix cache's hashes (tests inject colliding ones).
  Scheduler(BlockAllocator& allocator, const SchedulerLimits& limits, BlockHashFunction block_hash = BlockHash)
      : allocator_(allocator),
        limits_(limits),
        prefix_cache_(allocator, limits.block_size, limits.enable_prefix_caching, block_hash) {}

  void AddWaiting(Sequence* sequence);
  // Beam search: `child` (a new beam extending `parent` by one token) joins where its parent is: running on
  // a share of the parent's blocks with its computed tokens, or, when the parent waits (preempted), waiting.
  void Fork(const Sequence& parent, Sequence* child);
  // Takes a sequence out of the queue or the batch (finished, cancelled, failed) and frees its blocks.
  void Remove(Sequence* sequence);
  SchedulerOutput Schedule();
  // The plan's forward pass succeeded: its chunks' K/V are in the cache.
  void Computed(const SchedulerOutput& plan);

  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  // Tokens of waiting and prefilling sequences not yet computed (after the step's chunks are counted).
  int64_t pending_prefill_tokens() const;
  const BlockAllocator& allocator() const { return allocator_; }

 private:
  // Blocks `sequence` lacks for `num_tokens` more tokens.
  int32_t BlocksNeeded(const Sequence& sequence, int64_t num_tokens) const;
  // The most of `wanted` tokens that fit `sequence`'s blocks plus the free ones but `held_back`.
  int64_t TokensThatFit(const Sequence& sequence, int64_t wanted, int32_t held_back) const;
  void Preempt(Sequence* sequence, SchedulerOutput& output);
  // The newest running sequence without a chunk in `output`, or null.
  Sequence* NewestUnscheduled(const SchedulerOutput& output) const;
  // The newest running beam that has proposed and waits for its siblings (nothing to compute), or null.
  Sequence* NewestIdleBeam() const;
  // How many of `sequence`'s uncomputed tokens a chunk may take: the budget, and the prompt logprob rows
  // left this step.
  int64_t ChunkLimit(const Sequence& sequence, int64_t budget) const;
  void InsertRunning(Sequence* sequence);
  // Choice 0 of the request is still computing the prompt that this later choice will share.
  bool WaitsForChoiceZero(const Sequence& sequence) const;
  // The next chunk of `sequence` starts in a block another sequence holds too.
  bool WritesSharedBlock(const Sequence& sequence) const;
  // Gives `sequence` its own copy of that block.
  void CopyOnWrite(Sequence& sequence, SchedulerOutput& output);
  void AddChunk(Sequence* sequence, int64_t num_tokens, int64_t& budget, SchedulerOutput& output);

  BlockAllocator& allocator_;
  const SchedulerLimits limits_;
  PrefixCache prefix_cache_;
  std::deque<Sequence*> waiting_;         // by arrival, oldest first
  std::vector<Sequence*> running_;        // by arrival (request id, choice), oldest first
  int64_t prompt_logprob_rows_left_ = 0;  // this step's
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SCHEDULER_H_
