#ifndef LLMC_WORKER_GRAMMAR_AUTOMATON_H_
#define LLMC_WORKER_GRAMMAR_AUTOMATON_H_

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/grammar/grammar.h"

namespace llmc::grammar {

struct CompileLimits {
  // Bounds the work and memory of one grammar: DFA states over all rules.
  size_t max_states = 100000;
  // The grammar's mask cache (token_masks.h), shared by its matchers.
  size_t max_cache_bytes = size_t{64} << 20;
};

inline constexpr int32_t kDeadState = -1;

// One rule's body as a deterministic automaton over bytes and references to other rules: a transition on a
// byte class, or "call rule R, then continue at state S". Built by subset construction over the Thompson
// automaton of the body, with repetitions unrolled.
struct RuleAutomaton {
  std::string name;
  int32_t start = 0;       // a global state id
  bool has_calls = false;  // false: a terminal (a regular rule: bytes only, matched by its DFA alone)
};

// A grammar ready to match: every rule's automaton, with global state ids. Immutable; shared by every
// matcher of the grammar.
class MaskCache;

class CompiledGrammar {
 public:
  CompiledGrammar();
  ~CompiledGrammar();

  struct Call {
    int32_t rule;
    int32_t return_state;
  };
  struct State {
    int32_t rule = 0;
    bool accepting = false;
    bool has_bytes = false;  // some byte leads on
    // Accepting with nothing after: a call that returns here needs no frame (the callee returns straight
    // to the caller's caller).
    bool final_only = false;
    // No calls and not accepting: the only way on is a byte within this rule, whatever the stack holds, so
    // what a token does from here depends on this state alone until it reaches a state that is not plain.
    bool plain = false;
    uint32_t calls_begin = 0, calls_end = 0;  // calls_ range
  };

  int32_t root() const { return root_; }
  const std::vector<RuleAutomaton>& rules() const { return rules_; }
  const State& state(int32_t id) const { return states_[id]; }
  size_t num_states() const { return states_.size(); }
  // The state after `byte`, or kDeadState.
  int32_t Next(int32_t state, uint8_t byte) const {
    return transitions_[static_cast<size_t>(state) * num_classes_ + byte_class_[byte]];
  }
  const Call* calls_begin(int32_t state) const { return calls_.data() + states_[state].calls_begin; }
  const Call* calls_end(int32_t state) const { return calls_.data() + states_[state].calls_end; }
  bool IsPlain(int32_t state) const { return states_[state].plain; }
  // The transition table as the hot loops read it: Next(s, b) is rows()[s * num_classes() + byte_classes()[b]],
  // and plain_flags()[s] is IsPlain(s).
  const int32_t* rows() const { return transitions_.data(); }
  const uint8_t* byte_classes() const { return byte_class_.data(); }
  size_t num_classes() const { return num_classes_; }
  const uint8_t* plain_flags() const { return plain_flags_.data(); }
  // For a state that is not plain: the bytes a token may go on with past it, other than by this rule's own
  // bytes when it has no calls (what may follow the rule when it can end here; and, with calls, what this
  // state and its callees may read next). A superset; a token whose next byte is outside it stops here.
  const std::bitset<256>& ExitFilter(int32_t state) const { return exit_filters_[state]; }
  MaskCache& mask_cache() const { return *mask_cache_; }
  // The automaton's own memory (its mask cache, bounded apart, not included).
  size_t memory_bytes() const {
    return states_.size() * (sizeof(State) + sizeof(std::bitset<256>) + 1) + calls_.size() * sizeof(Call) +
           transitions_.size() * sizeof(int32_t);
  }

 private:
  friend class AutomatonBuilder;
  int32_t root_ = 0;
  std::vector<RuleAutomaton> rules_;
  std::vector<State> states_;
  std::vector<Call> calls_;
  std::array<uint8_t, 256> byte_class_{};
  size_t num_classes_ = 1;
  std::vector<int32_t> transitions_;  // [state][class]
  std::vector<std::bitset<256>> exit_filters_;
  std::vector<uint8_t> plain_flags_;
  std::unique_ptr<MaskCache> mask_cache_;
};

// Refuses left recursion (a rule that can reach itself without consuming a byte) by naming the rule, and a
// grammar beyond `limits`.
absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileGrammar(const Grammar& grammar,
                                                                      const CompileLimits& limits = {});

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_AUTOMATON_H_
