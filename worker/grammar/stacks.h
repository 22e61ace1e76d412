#ifndef LLMC_WORKER_GRAMMAR_STACKS_H_
#define LLMC_WORKER_GRAMMAR_STACKS_H_

#include <bitset>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "worker/grammar/automaton.h"

namespace llmc::grammar {

// Deeper nesting than this is not generated (a push beyond it is not taken), which bounds every closure.
inline constexpr uint32_t kMaxStackDepth = 1024;
// An ambiguous grammar can double its set of stacks with every byte; past these bounds a set counts as dead
// (nothing more may be generated there), which keeps every step's work bounded. Grammars from JSON Schema
// keep a handful of stacks.
inline constexpr size_t kMaxStacksPerSet = 128;
inline constexpr size_t kMaxClosureVisits = 16384;

// One frame of a parse stack. The top frame holds the current state; each frame below holds the state its
// caller continues at when the call returns.
struct StackFrame {
  int32_t state;
  int32_t parent;  // -1 at the bottom
  uint32_t depth;  // frames from the bottom, this one included
};

// The configurations a matcher may be in: stacks (top frame ids) whose top state reads a byte next, and
// whether the root rule may be complete here. Always closed under calls and returns.
struct StackSet {
  std::vector<int32_t> stacks;  // sorted, distinct
  bool can_end = false;

  bool dead() const { return stacks.empty() && !can_end; }
  bool operator==(const StackSet& other) const { return can_end == other.can_end && stacks == other.stacks; }
};

// Frames interned by (state, parent), so equal stacks have one id and sets of stacks compare as id lists.
// Frames are never freed: a matcher's arena lives as long as its sequence.
class StackArena {
 public:
  explicit StackArena(const CompiledGrammar& grammar) : grammar_(grammar) {}

  const CompiledGrammar& grammar() const { return grammar_; }
  int32_t Intern(int32_t state, int32_t parent);
  const StackFrame& frame(int32_t id) const { return frames_[id]; }
  size_t size() const { return frames_.size(); }

  // The root rule's start, closed (dead when its closure overflows).
  StackSet Start();
  // The closure of `seeds` (frame ids) under calls and returns, into `out`; dead when it visits more than
  // kMaxClosureVisits frames or keeps more than kMaxStacksPerSet stacks (then overflowed() turns true).
  void Close(absl::Span<const int32_t> seeds, StackSet& out);
  // Whether some closure was cut short by the bounds above.
  bool overflowed() const { return overflowed_; }
  // The configurations after reading `byte` from `from` (dead when none reads it), into `out`.
  void Advance(const StackSet& from, uint8_t byte, StackSet& out);
  // From a single stack: its top state reads `byte` (the first byte of a token, in mask walks).
  void AdvanceStack(int32_t stack, uint8_t byte, StackSet& out);
  std::bitset<256> AllowedBytes(const StackSet& set) const;
  // The states of a stack from top to bottom: what its future depends on, equal across matchers.
  void Contents(int32_t stack, std::vector<int32_t>& states) const;

 private:
  void Visit(int32_t frame, StackSet& out);

  const CompiledGrammar& grammar_;
  std::vector<StackFrame> frames_;
  absl::flat_hash_map<uint64_t, int32_t> ids_;
  std::vector<uint32_t> visited_;  // closure generation per frame
  uint32_t generation_ = 0;
  bool overflowed_ = false;
  std::vector<int32_t> pending_;
  std::vector<int32_t> seeds_;
};

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_STACKS_H_
