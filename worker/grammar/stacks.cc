#include "worker/grammar/stacks.h"

#include <algorithm>

namespace llmc::grammar {

int32_t StackArena::Intern(int32_t state, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) | static_cast<uint32_t>(parent);
  const auto [it, inserted] = ids_.try_emplace(key, static_cast<int32_t>(frames_.size()));
  if (inserted) {
    const uint32_t depth = parent < 0 ? 1 : frames_[parent].depth + 1;
    frames_.push_back({state, parent, depth});
  }
  return it->second;
}

StackSet StackArena::Start() {
  StackSet set;
  const int32_t bottom = Intern(grammar_.rules()[grammar_.root()].start, -1);
  Close({bottom}, set);
  return set;
}

void StackArena::Close(absl::Span<const int32_t> seeds, StackSet& out) {
  out.stacks.clear();
  out.can_end = false;
  if (++generation_ == 0) {  // the marks wrapped: old marks could pass for this closure's
    std::fill(visited_.begin(), visited_.end(), 0);
    generation_ = 1;
  }
  pending_.assign(seeds.begin(), seeds.end());
  size_t visits = 0;
  while (!pending_.empty()) {
    if (++visits > kMaxClosureVisits || out.stacks.size() > kMaxStacksPerSet) {
      overflowed_ = true;
      pending_.clear();
      out.stacks.clear();
      out.can_end = false;
      return;
    }
    const int32_t frame_id = pending_.back();
    pending_.pop_back();
    if (visited_.size() < frames_.size()) visited_.resize(frames_.size() * 2, 0);
    if (visited_[frame_id] == generation_) continue;
    visited_[frame_id] = generation_;
    const StackFrame frame = frames_[frame_id];
    const CompiledGrammar::State& state = grammar_.state(frame.state);
    if (state.has_bytes) out.stacks.push_back(frame_id);
    if (state.accepting) {
      if (frame.parent < 0) {
        out.can_end = true;
      } else {
        pending_.push_back(frame.parent);  // return: the caller's frame is the top again
      }
    }
    if (frame.depth >= kMaxStackDepth) continue;
    for (const CompiledGrammar::Call* call = grammar_.calls_begin(frame.state); call != grammar_.calls_end(frame.state);
         ++call) {
      // A call whose return state can only return needs no frame of its own.
      const int32_t caller =
          grammar_.state(call->return_state).final_only ? frame.parent : Intern(call->return_state, frame.parent);
      pending_.push_back(Intern(grammar_.rules()[call->rule].start, caller));
    }
  }
  std::sort(out.stacks.begin(), out.stacks.end());
}

void StackArena::Advance(const StackSet& from, uint8_t byte, StackSet& out) {
  seeds_.clear();
  for (const int32_t stack : from.stacks) {
    const StackFrame& frame = frames_[stack];
    const int32_t next = grammar_.Next(frame.state, byte);
    if (next != kDeadState) seeds_.push_back(Intern(next, frame.parent));
  }
  if (seeds_.empty()) {
    out.stacks.clear();
    out.can_end = false;
    return;
  }
  std::vector<int32_t> seeds = std::move(seeds_);
  Close(seeds, out);
  seeds_ = std::move(seeds);
}

void StackArena::AdvanceStack(int32_t stack, uint8_t byte, StackSet& out) {
  const StackFrame& frame = frames_[stack];
  const int32_t next = grammar_.Next(frame.state, byte);
  if (next == kDeadState) {
    out.stacks.clear();
    out.can_end = false;
    return;
  }
  const int32_t seed = Intern(next, frame.parent);
  Close({seed}, out);
}

std::bitset<256> StackArena::AllowedBytes(const StackSet& set) const {
  std::bitset<256> allowed;
  for (const int32_t stack : set.stacks) {
    const int32_t state = frames_[stack].state;
    for (int byte = 0; byte < 256; ++byte) {
      if (!allowed[byte] && grammar_.Next(state, static_cast<uint8_t>(byte)) != kDeadState) allowed.set(byte);
    }
  }
  return allowed;
}

void StackArena::Contents(int32_t stack, std::vector<int32_t>& states) const {
  states.clear();
  for (int32_t frame = stack; frame >= 0; frame = frames_[frame].parent) states.push_back(frames_[frame].state);
}

}  // namespace llmc::grammar
