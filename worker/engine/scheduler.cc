#include "worker/engine/scheduler.h"

#include <algorithm>
#include <tuple>

namespace llmc::engine {
namespace {

bool ArrivedBefore(const Sequence* a, const Sequence* b) {
  return std::tie(a->group.id, a->choice_index) < std::tie(b->group.id, b->choice_index);
}

}  // namespace

void Scheduler::AddWaiting(Sequence* sequence) {
  sequence->state = SequenceState::kQueued;
  waiting_.push_back(sequence);
}

void Scheduler::Remove(Sequence* sequence) {
  allocator_.Release(sequence->block_table);
  if (auto it = std::find(running_.begin(), running_.end(), sequence); it != running_.end()) {
    running_.erase(it);
  } else if (auto queued = std::find(waiting_.begin(), waiting_.end(), sequence); queued != waiting_.end()) {
    waiting_.erase(queued);
  }
}

void Scheduler::InsertRunning(Sequence* sequence) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), sequence, ArrivedBefore), sequence);
}

void Scheduler::Preempt(Sequence* sequence, SchedulerOutput& output) {
  allocator_.Release(sequence->block_table);
  sequence->num_computed = 0;
  sequence->state = SequenceState::kQueued;
  running_.erase(std::find(running_.begin(), running_.end(), sequence));
  output.preempted.push_back(sequence);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput output;
  int64_t budget = limits_.max_num_batched_tokens;
  const auto add_chunk = [&](Sequence* sequence, int64_t num_tokens) {
    const bool samples = num_tokens == sequence->num_uncomputed();
    // Whatever is not a single token following computed context is (part of) a prefill.
    const bool decode = num_tokens == 1 && sequence->num_computed > 0;
    (decode ? output.num_decode_tokens : output.num_prefill_tokens) += num_tokens;
    output.chunks.push_back({sequence, num_tokens, samples});
    budget -= num_tokens;
  };

  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* sequence = running_[i];
    const int64_t num_tokens = std::min(sequence->num_uncomputed(), budget);
    const int32_t needed = BlocksFor(sequence->num_computed + num_tokens, limits_.block_size) -
                           static_cast<int32_t>(sequence->block_table.size());
    bool preempted_self = false;
    while (needed > allocator_.num_free()) {
      Sequence* victim = running_.back();
      preempted_self = victim == sequence;
      Preempt(victim, output);
      if (preempted_self) break;
    }
    if (preempted_self) break;  // it was the newest: everything after it is gone too
    allocator_.Allocate(needed, sequence->block_table);
    add_chunk(sequence, num_tokens);
  }
  // Oldest preempted first at the front of the queue, so they resume before newer arrivals.
  for (auto it = output.preempted.begin(); it != output.preempted.end(); ++it) waiting_.push_front(*it);

  // A small reserve of free blocks keeps new admissions from forcing running sequences out at once.
  const int32_t reserve = allocator_.num_blocks() / 100;
  while (budget > 0 && !waiting_.empty() && static_cast<int64_t>(running_.size()) < limits_.max_running) {
    Sequence* sequence = waiting_.front();
    const int64_t num_tokens = std::min(sequence->num_uncomputed(), budget);
    const int32_t needed = BlocksFor(num_tokens, limits_.block_size);
    if (needed + reserve > allocator_.num_free() && !(running_.empty() && needed <= allocator_.num_free())) break;
    waiting_.pop_front();
    allocator_.Allocate(needed, sequence->block_table);
    sequence->state = SequenceState::kPrefill;
    InsertRunning(sequence);
    add_chunk(sequence, num_tokens);
  }
  return output;
}

}  // namespace llmc::engine
