#include "worker/grammar/automaton.h"

#include <algorithm>
#include <bitset>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "worker/grammar/token_masks.h"
#include "worker/grammar/utf8_sequences.h"

namespace llmc::grammar {

CompiledGrammar::CompiledGrammar() = default;
CompiledGrammar::~CompiledGrammar() = default;

// Thompson automata per rule, then subset construction into one table of global DFA states.
class AutomatonBuilder {
 public:
  AutomatonBuilder(const Grammar& grammar, const CompileLimits& limits) : grammar_(grammar), limits_(limits) {}

  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Build();

 private:
  struct ByteEdge {
    uint8_t first, last;
    int32_t target;
  };
  struct CallEdge {
    int32_t rule, target;
  };
  struct NfaState {
    std::vector<int32_t> epsilon;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
  };

  absl::Status CheckRules();
  void ComputeByteClasses();
  int32_t NewNfaState();
  absl::StatusOr<int32_t> Emit(const Expr& expr, int32_t start);
  absl::Status EmitCharClass(const Expr& expr, int32_t start, int32_t end);
  absl::Status Determinize(int32_t rule, int32_t nfa_start, int32_t nfa_final);
  void Closure(std::vector<int32_t>& states);
  absl::Status CheckLeftRecursion();
  void CollectRanges(const Expr& expr, std::vector<std::pair<int, int>>& boundaries) const;
  void RemoveDeadEnds();
  void ComputeNullable();
  void ComputeExitFilters();
  void FindInlinedRules();
  size_t InlinedSize(const Expr& expr, std::vector<int>& visiting);

  const Grammar& grammar_;
  const CompileLimits limits_;
  std::vector<NfaState> nfa_;
  std::vector<bool> inlined_;      // per rule: small and free of calls, so copied into its callers
  std::vector<size_t> rule_size_;  // per rule, once known: its size with inlined rules copied in
  int inline_depth_ = 0;
  size_t subset_entries_ = 0;    // Thompson states over all deterministic states so far
  std::vector<bool> completes_;  // per state: can finish its rule without a byte
  std::vector<bool> nullable_;   // per rule
  std::vector<uint32_t> closure_mark_;
  uint32_t closure_generation_ = 0;
  std::shared_ptr<CompiledGrammar> out_ = std::make_shared<CompiledGrammar>();
};

namespace {

// Rules up to this size with no calls left and no unbounded repetition (a character, an escape, a keyword) are
// copied into their callers: a call is where a token's future stops depending on the state alone
// (token_masks.h), so a call per JSON character would leave almost every token to be checked against the stack.
// Rules that loop (a string's body, digits) stay rules, so that every use shares their states and tables.
constexpr size_t kMaxInlinedSize = 256;
constexpr int kMaxInlineDepth = 64;
constexpr size_t kNotInlined = ~size_t{0};

// Bounds the Thompson automata, which repetitions unroll, before determinization, and the total size of the
// sets of Thompson states the deterministic states stand for (kept twice while determinizing).
constexpr size_t kMaxNfaStates = 4'000'000;
constexpr size_t kMaxSubsetEntries = 8'000'000;

absl::Status TooLarge(size_t limit, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("grammar too large: more than ", limit, " ", what, " (reduce repetition bounds or lengths)"));
}

}  // namespace

// Sizes weighted the way repetition unrolls them; kNotInlined for an expression that keeps a call.
size_t AutomatonBuilder::InlinedSize(const Expr& expr, std::vector<int>& visiting) {
  const auto add = [](size_t a, size_t b) { return a == kNotInlined || b == kNotInlined ? kNotInlined : a + b; };
  switch (expr.kind) {
    case Expr::Kind::kEmpty:
      return 1;
    case Expr::Kind::kLiteral:
      return expr.literal.size();
    case Expr::Kind::kCharClass:
      return 1 + 3 * expr.ranges.size();
    case Expr::Kind::kRuleRef: {
      const int32_t rule = expr.rule;
      if (rule < 0 || static_cast<size_t>(rule) >= grammar_.rules.size()) return kNotInlined;
      if (rule_size_[rule] != 0) return inlined_[rule] ? rule_size_[rule] : kNotInlined;
      if (visiting[rule] != 0) return kNotInlined;  // recursive: stays a call
      // A long chain of rules (r1 ::= r2, r2 ::= r3, ...) is followed only so deep: the rest stays calls, and
      // neither this pass nor Emit recurses without bound.
      if (inline_depth_ >= kMaxInlineDepth) return kNotInlined;
      visiting[rule] = 1;
      ++inline_depth_;
      const size_t size = InlinedSize(grammar_.rules[rule].body, visiting);
      --inline_depth_;
      visiting[rule] = 0;
      inlined_[rule] = size != kNotInlined && size <= kMaxInlinedSize && rule != grammar_.root;
      rule_size_[rule] = size == kNotInlined ? kNotInlined : std::max<size_t>(size, 1);
      return inlined_[rule] ? rule_size_[rule] : kNotInlined;
    }
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice: {
      size_t total = 1;
      for (const Expr& child : expr.children) total = add(total, InlinedSize(child, visiting));
      return total;
    }
    case Expr::Kind::kRepeat: {
      const size_t child = InlinedSize(expr.children.front(), visiting);
      if (child == kNotInlined || expr.max == kUnbounded) return kNotInlined;
      const size_t copies = expr.max == kUnbounded ? expr.min + 1 : expr.max;
      return copies > kMaxInlinedSize ? kMaxInlinedSize + 1 : child * copies;
    }
  }
  return kNotInlined;
}

void AutomatonBuilder::FindInlinedRules() {
  inlined_.assign(grammar_.rules.size(), false);
  rule_size_.assign(grammar_.rules.size(), 0);
  std::vector<int> visiting(grammar_.rules.size(), 0);
  for (size_t r = 0; r < grammar_.rules.size(); ++r) InlinedSize(Expr::RuleRef(static_cast<int32_t>(r)), visiting);
}

absl::Status AutomatonBuilder::CheckRules() {
  if (grammar_.rules.empty()) return absl::InvalidArgumentError("grammar has no rules");
  if (grammar_.root < 0 || static_cast<size_t>(grammar_.root) >= grammar_.rules.size()) {
    return absl::InvalidArgumentError("grammar root is not a rule");
  }
  return absl::OkStatus();
}

void AutomatonBuilder::CollectRanges(const Expr& expr, std::vector<std::pair<int, int>>& ranges) const {
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      for (const char c : expr.literal) {
        const int byte = static_cast<unsigned char>(c);
        ranges.push_back({byte, byte});
      }
      return;
    case Expr::Kind::kCharClass:
      for (const CodePointRange& range : expr.ranges) {
        for (const auto& sequence : Utf8Sequences(range)) {
          for (const ByteRange& bytes : sequence) ranges.push_back({bytes.first, bytes.last});
        }
      }
      return;
    default:
      for (const Expr& child : expr.children) CollectRanges(child, ranges);
  }
}

// Bytes that every range treats alike share a class: a DFA row per class rather than per byte.
void AutomatonBuilder::ComputeByteClasses() {
  std::vector<std::pair<int, int>> ranges;
  for (const Rule& rule : grammar_.rules) CollectRanges(rule.body, ranges);
  std::vector<bool> starts(257, false);
  starts[0] = true;
  for (const auto& [first, last] : ranges) {
    starts[first] = true;
    starts[last + 1] = true;
  }
  int class_id = -1;
  for (int byte = 0; byte < 256; ++byte) {
    if (starts[byte]) ++class_id;
    out_->byte_class_[byte] = static_cast<uint8_t>(class_id);
  }
  out_->num_classes_ = static_cast<size_t>(class_id) + 1;
}

int32_t AutomatonBuilder::NewNfaState() {
  nfa_.emplace_back();
  return static_cast<int32_t>(nfa_.size()) - 1;
}

absl::Status AutomatonBuilder::EmitCharClass(const Expr& expr, int32_t start, int32_t end) {
  for (const CodePointRange& range : expr.ranges) {
    for (const auto& sequence : Utf8Sequences(range)) {
      int32_t from = start;
      for (size_t i = 0; i < sequence.size(); ++i) {
        const int32_t to = i + 1 == sequence.size() ? end : NewNfaState();
        nfa_[from].bytes.push_back({sequence[i].first, sequence[i].last, to});
        from = to;
      }
    }
  }
  if (nfa_.size() > kMaxNfaStates) return TooLarge(kMaxNfaStates, "automaton states before determinization");
  return absl::OkStatus();
}

absl::StatusOr<int32_t> AutomatonBuilder::Emit(const Expr& expr, int32_t start) {
  if (nfa_.size() > kMaxNfaStates) return TooLarge(kMaxNfaStates, "automaton states before determinization");
  switch (expr.kind) {
    case Expr::Kind::kEmpty:
      return start;
    case Expr::Kind::kLiteral: {
      int32_t from = start;
      for (const char c : expr.literal) {
        const auto byte = static_cast<uint8_t>(c);
        const int32_t to = NewNfaState();
        nfa_[from].bytes.push_back({byte, byte, to});
        from = to;
      }
      return from;
    }
    case Expr::Kind::kCharClass: {
      const int32_t end = NewNfaState();
      if (absl::Status status = EmitCharClass(expr, start, end); !status.ok()) return status;
      return end;
    }
    case Expr::Kind::kRuleRef: {
      if (expr.rule < 0 || static_cast<size_t>(expr.rule) >= grammar_.rules.size()) {
        return absl::InvalidArgumentError(absl::StrCat("grammar refers to an undefined rule (", expr.rule, ")"));
      }
      if (inlined_[expr.rule]) return Emit(grammar_.rules[expr.rule].body, start);
      const int32_t end = NewNfaState();
      nfa_[start].calls.push_back({expr.rule, end});
      return end;
    }
    case Expr::Kind::kSequence: {
      int32_t at = start;
      for (const Expr& child : expr.children) {
        absl::StatusOr<int32_t> next = Emit(child, at);
        if (!next.ok()) return next.status();
        at = *next;
      }
      return at;
    }
    case Expr::Kind::kChoice: {
      const int32_t end = NewNfaState();
      for (const Expr& child : expr.children) {
        const int32_t branch = NewNfaState();
        nfa_[start].epsilon.push_back(branch);
        absl::StatusOr<int32_t> branch_end = Emit(child, branch);
        if (!branch_end.ok()) return branch_end.status();
        nfa_[*branch_end].epsilon.push_back(end);
      }
      return end;
    }
    case Expr::Kind::kRepeat: {
      const Expr& child = expr.children.front();
      int32_t at = start;
      for (uint32_t i = 0; i < expr.min; ++i) {
        absl::StatusOr<int32_t> next = Emit(child, at);
        if (!next.ok()) return next.status();
        at = *next;
      }
      if (expr.max == kUnbounded) {
        const int32_t hub = NewNfaState();
        nfa_[at].epsilon.push_back(hub);
        absl::StatusOr<int32_t> body_end = Emit(child, hub);
        if (!body_end.ok()) return body_end.status();
        nfa_[*body_end].epsilon.push_back(hub);
        return hub;
      }
      const int32_t end = NewNfaState();
      nfa_[at].epsilon.push_back(end);
      for (uint32_t i = expr.min; i < expr.max; ++i) {
        absl::StatusOr<int32_t> next = Emit(child, at);
        if (!next.ok()) return next.status();
        at = *next;
        nfa_[at].epsilon.push_back(end);
      }
      return end;
    }
  }
  return absl::InternalError("unknown grammar expression");
}

void AutomatonBuilder::Closure(std::vector<int32_t>& states) {
  if (closure_mark_.size() < nfa_.size()) closure_mark_.resize(nfa_.size(), 0);
  ++closure_generation_;
  std::vector<int32_t> pending = states;
  states.clear();
  while (!pending.empty()) {
    const int32_t state = pending.back();
    pending.pop_back();
    if (closure_mark_[state] == closure_generation_) continue;
    closure_mark_[state] = closure_generation_;
    states.push_back(state);
    for (const int32_t next : nfa_[state].epsilon) pending.push_back(next);
  }
  std::sort(states.begin(), states.end());
}

absl::Status AutomatonBuilder::Determinize(int32_t rule, int32_t nfa_start, int32_t nfa_final) {
  const size_t classes = out_->num_classes_;
  absl::flat_hash_map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  const int32_t base = static_cast<int32_t>(out_->states_.size());
  const auto intern = [&](std::vector<int32_t> set) -> absl::StatusOr<int32_t> {
    Closure(set);
    if (set.empty()) return kDeadState;
    const auto [it, inserted] = ids.try_emplace(set, base + static_cast<int32_t>(sets.size()));
    if (inserted) {
      if (out_->states_.size() + sets.size() + 1 > limits_.max_states) return TooLarge(limits_.max_states, "states");
      // The states are few but each may stand for many Thompson states ((a?){4000}): bound their sum too.
      subset_entries_ += set.size();
      if (subset_entries_ > kMaxSubsetEntries) return TooLarge(kMaxSubsetEntries, "automaton subset entries");
      sets.push_back(std::move(set));
    }
    return it->second;
  };
  absl::StatusOr<int32_t> start = intern({nfa_start});
  if (!start.ok()) return start.status();
  out_->rules_[rule].start = *start;
  std::vector<std::vector<int32_t>> targets(classes);
  for (size_t index = 0; index < sets.size(); ++index) {
    CompiledGrammar::State state;
    state.rule = rule;
    state.calls_begin = static_cast<uint32_t>(out_->calls_.size());
    std::vector<int32_t> row(classes, kDeadState);
    for (auto& target : targets) target.clear();
    absl::flat_hash_map<int32_t, std::vector<int32_t>> call_targets;
    std::vector<int32_t> called_rules;  // first-seen order, for a deterministic table
    for (const int32_t nfa_state : sets[index]) {
      if (nfa_state == nfa_final) state.accepting = true;
      for (const ByteEdge& edge : nfa_[nfa_state].bytes) {
        for (size_t c = out_->byte_class_[edge.first]; c <= out_->byte_class_[edge.last]; ++c) {
          targets[c].push_back(edge.target);
        }
      }
      for (const CallEdge& call : nfa_[nfa_state].calls) {
        auto [it, inserted] = call_targets.try_emplace(call.rule);
        if (inserted) called_rules.push_back(call.rule);
        it->second.push_back(call.target);
      }
    }
    for (size_t c = 0; c < classes; ++c) {
      if (targets[c].empty()) continue;
      absl::StatusOr<int32_t> next = intern(targets[c]);
      if (!next.ok()) return next.status();
      row[c] = *next;
      state.has_bytes = true;
    }
    for (const int32_t called : called_rules) {
      absl::StatusOr<int32_t> next = intern(call_targets[called]);
      if (!next.ok()) return next.status();
      out_->calls_.push_back({called, *next});
      out_->rules_[rule].has_calls = true;
    }
    state.calls_end = static_cast<uint32_t>(out_->calls_.size());
    out_->states_.push_back(state);
    out_->transitions_.insert(out_->transitions_.end(), row.begin(), row.end());
  }
  return absl::OkStatus();
}

// A state is live when its rule can still complete from it: it accepts, a byte leads to a live state, or it
// calls a rule that can complete (from its start) and returns to a live state. Transitions and calls into
// anything else are dead ends (an empty class after a byte, a contradiction inside a JSON schema, a rule
// that matches nothing) and are removed, so that every byte a matcher allows leads somewhere it can go on
// or end: AllowedNextBytes() agrees with AcceptBytes, and a mask never leads into a dead end. A worklist
// over the reversed edges, linear in the table.
void AutomatonBuilder::RemoveDeadEnds() {
  const size_t num_states = out_->states_.size();
  const size_t num_rules = out_->rules_.size();
  const size_t classes = out_->num_classes_;
  std::vector<std::vector<int32_t>> byte_preds(num_states);
  std::vector<std::vector<uint32_t>> calls_by_return(num_states), calls_by_rule(num_rules);
  std::vector<int32_t> call_owner(out_->calls_.size());
  std::vector<int32_t> rule_of_start(num_states, -1);
  for (size_t r = 0; r < num_rules; ++r) rule_of_start[out_->rules_[r].start] = static_cast<int32_t>(r);
  std::vector<bool> live(num_states, false), productive(num_rules, false);
  std::vector<int32_t> pending;
  for (size_t s = 0; s < num_states; ++s) {
    const CompiledGrammar::State& state = out_->states_[s];
    for (size_t c = 0; c < classes; ++c) {
      const int32_t next = out_->transitions_[s * classes + c];
      if (next != kDeadState && (byte_preds[next].empty() || byte_preds[next].back() != static_cast<int32_t>(s))) {
        byte_preds[next].push_back(static_cast<int32_t>(s));
      }
    }
    for (uint32_t c = state.calls_begin; c < state.calls_end; ++c) {
      call_owner[c] = static_cast<int32_t>(s);
      calls_by_return[out_->calls_[c].return_state].push_back(c);
      calls_by_rule[out_->calls_[c].rule].push_back(c);
    }
    if (state.accepting) {
      live[s] = true;
      pending.push_back(static_cast<int32_t>(s));
    }
  }
  const auto mark = [&](int32_t s) {
    if (!live[s]) {
      live[s] = true;
      pending.push_back(s);
    }
  };
  while (!pending.empty()) {
    const int32_t s = pending.back();
    pending.pop_back();
    for (const int32_t pred : byte_preds[s]) mark(pred);
    for (const uint32_t c : calls_by_return[s]) {
      if (productive[out_->calls_[c].rule]) mark(call_owner[c]);
    }
    if (const int32_t rule = rule_of_start[s]; rule >= 0) {
      productive[rule] = true;
      for (const uint32_t c : calls_by_rule[rule]) {
        if (live[out_->calls_[c].return_state]) mark(call_owner[c]);
      }
    }
  }

  std::vector<CompiledGrammar::Call> calls;
  for (RuleAutomaton& rule : out_->rules_) rule.has_calls = false;
  for (size_t s = 0; s < num_states; ++s) {
    CompiledGrammar::State& state = out_->states_[s];
    state.has_bytes = false;
    for (size_t c = 0; c < classes; ++c) {
      int32_t& next = out_->transitions_[s * classes + c];
      if (next != kDeadState && !live[next]) next = kDeadState;
      state.has_bytes = state.has_bytes || next != kDeadState;
    }
    const uint32_t begin = static_cast<uint32_t>(calls.size());
    for (uint32_t c = state.calls_begin; c < state.calls_end; ++c) {
      const CompiledGrammar::Call& call = out_->calls_[c];
      if (productive[call.rule] && live[call.return_state]) calls.push_back(call);
    }
    state.calls_begin = begin;
    state.calls_end = static_cast<uint32_t>(calls.size());
    if (state.calls_end != begin) out_->rules_[state.rule].has_calls = true;
  }
  out_->calls_ = std::move(calls);
}

// Left recursion would let a matcher push frames forever without reading a byte: a rule must not reach
// itself through calls made before any byte (through nullable rules).
void AutomatonBuilder::ComputeNullable() {
  const size_t num_rules = out_->rules_.size();
  const size_t num_states = out_->states_.size();
  // A state completes its rule without a byte when it accepts or calls a nullable rule that returns to such
  // a state; iterate to the fixed point.
  completes_.assign(num_states, false);
  nullable_.assign(num_rules, false);
  // Alternating directions: a chain of rules converges in a pass or two whichever way its ids run.
  for (bool changed = true, backwards = true; changed; backwards = !backwards) {
    changed = false;
    for (size_t i = 0; i < num_states; ++i) {
      const size_t s = backwards ? num_states - 1 - i : i;
      if (completes_[s]) continue;
      const CompiledGrammar::State& state = out_->states_[s];
      bool done = state.accepting;
      for (uint32_t c = state.calls_begin; c < state.calls_end && !done; ++c) {
        const CompiledGrammar::Call& call = out_->calls_[c];
        done = nullable_[call.rule] && completes_[call.return_state];
      }
      if (done) {
        completes_[s] = true;
        changed = true;
      }
    }
    for (size_t i = 0; i < num_rules; ++i) {
      const size_t r = backwards ? num_rules - 1 - i : i;
      if (!nullable_[r] && completes_[out_->rules_[r].start]) {
        nullable_[r] = true;
        changed = true;
      }
    }
  }
}

// FIRST of each state (the bytes that can come next from it within its rule and its callees) and FOLLOW of
// each rule (the bytes that can come right after it returns), to the fixed point; then each state's exit
// filter (token_masks.h).
void AutomatonBuilder::ComputeExitFilters() {
  const size_t num_rules = out_->rules_.size();
  const size_t num_states = out_->states_.size();
  std::vector<std::bitset<256>> first(num_states), follow(num_rules);
  for (size_t s = 0; s < num_states; ++s) {
    for (int byte = 0; byte < 256; ++byte) {
      if (out_->Next(static_cast<int32_t>(s), static_cast<uint8_t>(byte)) != kDeadState) first[s].set(byte);
    }
  }
  // FIRST flows from callees to callers, FOLLOW the other way: alternating directions settles chains of rules
  // in a few passes whichever way their ids run.
  for (bool changed = true, backwards = true; changed; backwards = !backwards) {
    changed = false;
    for (size_t i = 0; i < num_states; ++i) {
      const size_t s = backwards ? num_states - 1 - i : i;
      const CompiledGrammar::State& state = out_->states_[s];
      std::bitset<256> bytes = first[s];
      for (uint32_t c = state.calls_begin; c < state.calls_end; ++c) {
        const CompiledGrammar::Call& call = out_->calls_[c];
        bytes |= first[out_->rules_[call.rule].start];
        if (nullable_[call.rule]) bytes |= first[call.return_state];
        // What may follow the callee: what its return state starts with, or, when that state can complete,
        // what follows this rule.
        std::bitset<256> after = first[call.return_state];
        if (completes_[call.return_state]) after |= follow[state.rule];
        if ((follow[call.rule] | after) != follow[call.rule]) {
          follow[call.rule] |= after;
          changed = true;
        }
      }
      if (bytes != first[s]) {
        first[s] = bytes;
        changed = true;
      }
    }
  }
  out_->exit_filters_.resize(num_states);
  for (size_t s = 0; s < num_states; ++s) {
    const CompiledGrammar::State& state = out_->states_[s];
    std::bitset<256> filter = completes_[s] ? follow[state.rule] : std::bitset<256>();
    if (state.calls_begin != state.calls_end) filter |= first[s];
    out_->exit_filters_[s] = filter;
  }
}

// Left recursion would let a matcher push frames forever without reading a byte: a rule must not reach
// itself through calls made before any byte (through nullable rules).
absl::Status AutomatonBuilder::CheckLeftRecursion() {
  const size_t num_rules = out_->rules_.size();
  const size_t num_states = out_->states_.size();
  const std::vector<bool>& nullable = nullable_;
  // Rules each rule may call before any byte: from its start, through returns from nullable calls.
  std::vector<std::vector<int32_t>> first_calls(num_rules);
  std::vector<size_t> seen(num_states, 0);  // the rule (plus one) whose walk last reached each state
  for (size_t r = 0; r < num_rules; ++r) {
    std::vector<int32_t> pending = {out_->rules_[r].start};
    while (!pending.empty()) {
      const int32_t s = pending.back();
      pending.pop_back();
      if (seen[s] == r + 1) continue;
      seen[s] = r + 1;
      const CompiledGrammar::State& state = out_->states_[s];
      for (uint32_t c = state.calls_begin; c < state.calls_end; ++c) {
        const CompiledGrammar::Call& call = out_->calls_[c];
        first_calls[r].push_back(call.rule);
        if (nullable[call.rule]) pending.push_back(call.return_state);
      }
    }
  }
  // A cycle in that graph is left recursion.
  std::vector<int> color(num_rules, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<int32_t, size_t>> path;
  for (size_t root = 0; root < num_rules; ++root) {
    if (color[root] != 0) continue;
    path.push_back({static_cast<int32_t>(root), 0});
    color[root] = 1;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == first_calls[rule].size()) {
        color[rule] = 2;
        path.pop_back();
        continue;
      }
      const int32_t callee = first_calls[rule][next++];
      if (color[callee] == 1) {
        return absl::InvalidArgumentError(absl::StrCat("grammar rule '", out_->rules_[callee].name,
                                                       "' is left-recursive (it can reach itself before any "
                                                       "character); rewrite it with repetition"));
      }
      if (color[callee] == 0) {
        color[callee] = 1;
        path.push_back({callee, 0});
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> AutomatonBuilder::Build() {
  if (absl::Status status = CheckRules(); !status.ok()) return status;
  ComputeByteClasses();
  FindInlinedRules();
  out_->root_ = grammar_.root;
  out_->rules_.resize(grammar_.rules.size());
  for (size_t r = 0; r < grammar_.rules.size(); ++r) {
    out_->rules_[r].name = grammar_.rules[r].name;
    nfa_.clear();
    const int32_t start = NewNfaState();
    absl::StatusOr<int32_t> final_state = Emit(grammar_.rules[r].body, start);
    if (!final_state.ok()) return final_state.status();
    if (absl::Status status = Determinize(static_cast<int32_t>(r), start, *final_state); !status.ok()) {
      return status;
    }
  }
  ComputeNullable();
  if (absl::Status status = CheckLeftRecursion(); !status.ok()) return status;
  RemoveDeadEnds();  // after the check: a left-recursive rule is refused even where it matches nothing
  for (CompiledGrammar::State& state : out_->states_) {
    out_->plain_flags_.push_back(!state.accepting && state.calls_begin == state.calls_end);
    state.final_only = state.accepting && !state.has_bytes && state.calls_begin == state.calls_end;
    state.plain = !state.accepting && state.calls_begin == state.calls_end;
  }
  ComputeExitFilters();
  out_->mask_cache_ = std::make_unique<MaskCache>(limits_.max_cache_bytes);
  return std::shared_ptr<const CompiledGrammar>(std::move(out_));
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileGrammar(const Grammar& grammar,
                                                                      const CompileLimits& limits) {
  return AutomatonBuilder(grammar, limits).Build();
}

}  // namespace llmc::grammar
