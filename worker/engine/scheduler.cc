#include "worker/engine/scheduler.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "absl/base/internal/raw_logging.h"
#include "absl/types/span.h"

namespace llmc::engine {
namespace {

bool ArrivedBefore(const Sequence* a, const Sequence* b) {
  return std::tie(a->group.id, a->choice_index) < std::tie(b->group.id, b->choice_index);
}

// A beam that has proposed its next tokens has nothing to compute until its request's selection forks its
// successors (beam_search_action.h).
bool HasProposed(const Sequence& sequence) { return !sequence.beam_candidates.empty(); }

// The one beam a beam search starts with, before its first selection.
bool StartsBeamSearch(const Sequence& sequence) {
  return sequence.group.request.sampling.beam_search() && sequence.num_output() == 0;
}

bool Scheduled(const SchedulerOutput& output, const Sequence* sequence) {
  return std::any_of(output.chunks.begin(), output.chunks.end(),
                     [sequence](const ScheduledChunk& chunk) { return chunk.sequence == sequence; });
}

}  // namespace

void Scheduler::AddWaiting(Sequence* sequence) { waiting_.push_back(sequence); }

void Scheduler::Fork(const Sequence& parent, Sequence* child) {
  if (std::find(running_.begin(), running_.end(), &parent) == running_.end()) {
    child->num_computed = 0;
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), child, ArrivedBefore), child);
    return;
  }
  for (const int32_t block : parent.block_table) {
    allocator_.Share(block);
    child->block_table.push_back(block);
  }
  child->num_computed = parent.num_computed;
  InsertRunning(child);
}

void Scheduler::Remove(Sequence* sequence) {
  allocator_.Release(sequence->block_table);
  if (auto it = std::find(running_.begin(), running_.end(), sequence); it != running_.end()) {
    running_.erase(it);
  } else if (auto queued = std::find(waiting_.begin(), waiting_.end(), sequence); queued != waiting_.end()) {
    waiting_.erase(queued);
  }
}

void Scheduler::Computed(const SchedulerOutput& plan) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    chunk.sequence->num_computed += chunk.num_tokens;
    prefix_cache_.CacheFilledBlocks(*chunk.sequence, chunk.num_tokens);
  }
}

int64_t Scheduler::pending_prefill_tokens() const {
  int64_t tokens = 0;
  for (const Sequence* sequence : waiting_) tokens += HasProposed(*sequence) ? 0 : sequence->num_uncomputed();
  for (const Sequence* sequence : running_) {
    if (!sequence->decoding()) tokens += sequence->num_uncomputed();
  }
  return tokens;
}

bool Scheduler::WaitsForChoiceZero(const Sequence& sequence) const {
  if (sequence.choice_index == 0) return false;
  const Sequence& first = *sequence.group.sequences.front();
  if (first.finished() || first.num_output() > 0) return false;
  // Prompt logprobs must come before any token of the request (sequence.h); with prefix caching the prompt
  // is computed once, by choice 0, and shared (only its last token is left to compute).
  return first.collects_prompt_logprobs() || (prefix_cache_.enabled() && first.prompt_length > 1);
}

bool Scheduler::WritesSharedBlock(const Sequence& sequence) const {
  const size_t block = static_cast<size_t>(sequence.num_computed / limits_.block_size);
  return block < sequence.block_table.size() && allocator_.ref_count(sequence.block_table[block]) > 1;
}

void Scheduler::CopyOnWrite(Sequence& sequence, SchedulerOutput& output) {
  const size_t index = static_cast<size_t>(sequence.num_computed / limits_.block_size);
  std::vector<int32_t> copy;
  const bool allocated = allocator_.Allocate(1, copy);  // BlocksNeeded counted it
  ABSL_RAW_CHECK(allocated, "copy-on-write without a free block");
  std::vector<int32_t> shared = {sequence.block_table[index]};
  output.block_copies.emplace_back(shared[0], copy[0]);
  sequence.block_table[index] = copy[0];
  allocator_.Release(shared);
}

int32_t Scheduler::BlocksNeeded(const Sequence& sequence, int64_t num_tokens) const {
  return std::max<int32_t>(0, BlocksFor(sequence.num_computed + num_tokens, limits_.block_size) -
                                  static_cast<int32_t>(sequence.block_table.size())) +
         (num_tokens > 0 && WritesSharedBlock(sequence) ? 1 : 0);
}

int64_t Scheduler::TokensThatFit(const Sequence& sequence, int64_t wanted, int32_t held_back) const {
  const int64_t usable =
      std::max<int64_t>(0, allocator_.num_free() - held_back - (WritesSharedBlock(sequence) ? 1 : 0));
  const int64_t slots =
      (static_cast<int64_t>(sequence.block_table.size()) + usable) * limits_.block_size - sequence.num_computed;
  return std::max<int64_t>(0, std::min(wanted, slots));
}

int64_t Scheduler::ChunkLimit(const Sequence& sequence, int64_t budget) const {
  const int64_t limit = std::min(sequence.num_uncomputed(), budget);
  // Short of rows, the chunk stops where they run out (the prompt's last position needs none).
  return sequence.PromptLogprobRows(limit) > prompt_logprob_rows_left_ ? prompt_logprob_rows_left_ : limit;
}

void Scheduler::InsertRunning(Sequence* sequence) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), sequence, ArrivedBefore), sequence);
}

void Scheduler::Preempt(Sequence* sequence, SchedulerOutput& output) {
  allocator_.Release(sequence->block_table);
  sequence->num_computed = 0;
  running_.erase(std::find(running_.begin(), running_.end(), sequence));
  output.preempted.push_back(sequence);
}

Sequence* Scheduler::NewestIdleBeam() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (HasProposed(**it)) return *it;
  }
  return nullptr;
}

Sequence* Scheduler::NewestUnscheduled(const SchedulerOutput& output) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (!Scheduled(output, *it)) return *it;
  }
  return nullptr;
}

void Scheduler::AddChunk(Sequence* sequence, int64_t num_tokens, int64_t& budget, SchedulerOutput& output) {
  if (WritesSharedBlock(*sequence)) CopyOnWrite(*sequence, output);
  allocator_.Allocate(BlocksNeeded(*sequence, num_tokens), sequence->block_table);
  const bool samples = num_tokens == sequence->num_uncomputed();
  // Whatever is not a single token following computed context is (part of) a prefill.
  const bool decode = num_tokens == 1 && sequence->num_computed > 0;
  (decode ? output.num_decode_tokens : output.num_prefill_tokens) += num_tokens;
  output.chunks.push_back({sequence, num_tokens, samples});
  budget -= num_tokens;
  prompt_logprob_rows_left_ -= sequence->PromptLogprobRows(num_tokens);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput output;
  int64_t budget = limits_.max_num_batched_tokens;
  prompt_logprob_rows_left_ = kMaxPromptLogprobRowsPerStep;

  // 1. Decoders. The budget holds one token for each (max_num_batched_tokens >= max_running).
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* sequence = running_[i];
    if (!sequence->decoding()) continue;
    bool preempted_self = false;
    while (BlocksNeeded(*sequence, 1) > allocator_.num_free()) {
      // The newest is never one already given its token: those come before it.
      Sequence* victim = running_.back();
      preempted_self = victim == sequence;
      Preempt(victim, output);
      if (preempted_self) break;
    }
    if (preempted_self) break;  // it was the newest: everything after it is gone too
    AddChunk(sequence, 1, budget, output);
  }

  // Blocks the decoders will need for their next token: prefills leave them free, so that a prefill does
  // not make a decoder preempt next step.
  int32_t decoder_blocks = 0;
  for (const ScheduledChunk& chunk : output.chunks) {
    const Sequence& decoder = *chunk.sequence;
    if (decoder.num_computed + 2 > static_cast<int64_t>(decoder.block_table.size()) * limits_.block_size) {
      ++decoder_blocks;
    }
  }

  // 2. Prefills of running sequences, in chunks that fit. An older one may take the blocks of newer ones
  // that have no chunk this step; one that still does not fit keeps its blocks and waits.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* sequence = running_[i];
    if (sequence->decoding()) continue;
    const int64_t wanted = ChunkLimit(*sequence, budget);
    if (wanted == 0) continue;
    int64_t num_tokens = TokensThatFit(*sequence, wanted, decoder_blocks);
    while (num_tokens == 0) {
      Sequence* victim = NewestUnscheduled(output);
      if (victim == nullptr || victim == sequence) break;
      Preempt(victim, output);
      num_tokens = TokensThatFit(*sequence, wanted, decoder_blocks);
    }
    if (num_tokens > 0) AddChunk(sequence, num_tokens, budget, output);
  }
  // The queue stays in arrival order, so a preempted sequence resumes before anything that came after it.
  for (Sequence* sequence : output.preempted) {
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), sequence, ArrivedBefore), sequence);
  }
  // Memory ran short this step: admitting now would only preempt again.
  if (!output.preempted.empty()) return output;

  // 3. Admissions. A small reserve of free blocks keeps them from forcing running sequences out at once.
  // Choices waiting for their choice 0 keep their places in the running limit, which later requests
  // cannot take; so do the beams a beam search will fork.
  const int32_t reserve = allocator_.num_blocks() / 100 + decoder_blocks;
  // Places held for the beams that running beam searches will fork at their first selection.
  int64_t held = 0;
  for (const Sequence* sequence : running_) {
    if (StartsBeamSearch(*sequence)) held += sequence->group.request.sampling.beam_width - 1;
  }
  std::vector<Sequence*> idle_beams_preempted;
  for (auto it = waiting_.begin();
       budget > 0 && it != waiting_.end() && static_cast<int64_t>(running_.size()) + held < limits_.max_running;) {
    Sequence* sequence = *it;
    if (HasProposed(*sequence)) {  // preempted after proposing: waits for the selection, not for a recompute
      ++it;
      continue;
    }
    if (WaitsForChoiceZero(*sequence)) {
      ++held;
      ++it;
      continue;
    }
    const int64_t forks_held = StartsBeamSearch(*sequence) ? sequence->group.request.sampling.beam_width - 1 : 0;
    if (static_cast<int64_t>(running_.size()) + held + 1 + forks_held > limits_.max_running) break;
    prefix_cache_.TakeCachedPrefix(*sequence);
    prefix_cache_.SharePromptOfChoiceZero(*sequence);
    const int64_t num_tokens = ChunkLimit(*sequence, budget);
    const int32_t needed = BlocksNeeded(*sequence, num_tokens);
    const auto fits_now = [&] {
      return needed + reserve <= allocator_.num_free() || (running_.empty() && needed <= allocator_.num_free());
    };
    // Beams that proposed make no progress until their siblings have: their blocks go first, or a sibling
    // that needs blocks to catch up could wait for them forever.
    while (num_tokens > 0 && !fits_now()) {
      Sequence* idle = NewestIdleBeam();
      if (idle == nullptr) break;
      Preempt(idle, output);
      idle_beams_preempted.push_back(idle);
    }
    const bool fits = fits_now();
    if (num_tokens == 0 || !fits) {
      // It waits holding nothing; the cached blocks stay cached.
      allocator_.Release(sequence->block_table);
      sequence->num_computed = 0;
      if (!fits) break;
      ++it;
      continue;
    }
    it = waiting_.erase(it);
    prefix_cache_.CountLookup(*sequence, output.prefix_cache_queries, output.prefix_cache_hits);
    InsertRunning(sequence);
    AddChunk(sequence, num_tokens, budget, output);
    held += forks_held;
  }
  for (Sequence* sequence : idle_beams_preempted) {
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), sequence, ArrivedBefore), sequence);
  }
  return output;
}

}  // namespace llmc::engine
