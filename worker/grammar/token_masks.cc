#include "worker/grammar/token_masks.h"

#include <algorithm>

namespace llmc::grammar {
namespace {

inline void SetBit(TokenBits& bits, int32_t token) {
  bits[static_cast<size_t>(token) >> 6] |= uint64_t{1} << (token & 63);
}
inline bool TestBit(const TokenBits& bits, int32_t token) {
  return (bits[static_cast<size_t>(token) >> 6] >> (token & 63)) & 1;
}

void SetTokens(TokenBits& bits, const VocabularyIndex& vocabulary, const VocabularyIndex::Node& node) {
  for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) SetBit(bits, vocabulary.tokens()[k]);
}

// A DFA-only walk of the trie from one terminal state.
std::shared_ptr<const TerminalTable> BuildTerminalTable(const CompiledGrammar& grammar, int32_t state,
                                                        const VocabularyIndex& vocabulary) {
  auto table = std::make_shared<TerminalTable>();
  table->inside.assign(MaskWords(vocabulary.vocab_size()), 0);
  const std::vector<VocabularyIndex::Node>& nodes = vocabulary.nodes();
  std::vector<int32_t> states = {state};
  std::vector<uint32_t> accepting_depths;  // on the current path, below the root
  size_t i = 1;
  while (i < nodes.size()) {
    const VocabularyIndex::Node& node = nodes[i];
    const uint32_t depth = node.depth;
    while (!accepting_depths.empty() && accepting_depths.back() >= depth) accepting_depths.pop_back();
    const int32_t next = grammar.Next(states[depth - 1], node.byte);
    const bool alive = next != kDeadState && (grammar.state(next).has_bytes || grammar.state(next).accepting);
    if (!alive) {
      if (!accepting_depths.empty()) {
        const uint32_t tokens_end = nodes[node.subtree_end - 1].tokens_end;
        for (uint32_t k = node.tokens_begin; k < tokens_end; ++k) {
          for (const uint32_t exit_depth : accepting_depths) {
            table->exits.push_back({vocabulary.tokens()[k], exit_depth});
          }
        }
      }
      i = node.subtree_end;
      continue;
    }
    if (states.size() <= depth) states.resize(depth + 1);
    states[depth] = next;
    if (grammar.state(next).accepting) accepting_depths.push_back(depth);
    SetTokens(table->inside, vocabulary, node);
    ++i;
  }
  return table;
}

bool Consumes(StackArena& arena, const StackSet& from, absl::string_view bytes) {
  StackSet current = from;
  StackSet next;
  for (const char c : bytes) {
    arena.Advance(current, static_cast<uint8_t>(c), next);
    if (next.dead()) return false;
    std::swap(current, next);
  }
  return true;
}

// A walk position: a set of stacks, or, inside a terminal with nothing else possible and no way out yet, just
// the terminal's DFA state (stepped by table lookup, the bulk of a walk through a JSON string).
struct Level {
  bool fast = false;
  int32_t state = 0;
  int32_t parent = -1;
  StackSet set;
};

bool Settle(const StackArena& arena, Level& level) {
  level.fast = false;
  if (level.set.dead()) return false;
  if (level.set.stacks.size() == 1 && !level.set.can_end) {
    const StackFrame& frame = arena.frame(level.set.stacks.front());
    const CompiledGrammar& grammar = arena.grammar();
    if (grammar.InTerminal(frame.state) && !grammar.state(frame.state).accepting) {
      level.fast = true;
      level.state = frame.state;
      level.parent = frame.parent;
    }
  }
  return true;
}

bool Step(StackArena& arena, const Level& from, uint8_t byte, Level& out) {
  const CompiledGrammar& grammar = arena.grammar();
  if (from.fast) {
    const int32_t next = grammar.Next(from.state, byte);
    if (next == kDeadState) return false;
    const CompiledGrammar::State& state = grammar.state(next);
    if (!state.accepting) {
      if (!state.has_bytes) return false;
      out.fast = true;
      out.state = next;
      out.parent = from.parent;
      return true;
    }
    arena.Close({arena.Intern(next, from.parent)}, out.set);
    return Settle(arena, out);
  }
  arena.Advance(from.set, byte, out.set);
  return Settle(arena, out);
}

TokenBits WalkTrie(StackArena& arena, int32_t stack, const VocabularyIndex& vocabulary) {
  TokenBits mask(MaskWords(vocabulary.vocab_size()), 0);
  const std::vector<VocabularyIndex::Node>& nodes = vocabulary.nodes();
  std::vector<Level> levels(2);
  size_t i = 1;
  while (i < nodes.size()) {
    const VocabularyIndex::Node& node = nodes[i];
    const uint32_t depth = node.depth;
    if (levels.size() <= depth) levels.resize(depth + 1);
    bool alive;
    if (depth == 1) {
      arena.AdvanceStack(stack, node.byte, levels[1].set);
      alive = Settle(arena, levels[1]);
    } else {
      alive = Step(arena, levels[depth - 1], node.byte, levels[depth]);
    }
    if (!alive) {
      i = node.subtree_end;
      continue;
    }
    SetTokens(mask, vocabulary, node);
    ++i;
  }
  return mask;
}

}  // namespace

std::shared_ptr<const TerminalTable> MaskCache::FindTerminal(const VocabularyIndex& vocabulary, int32_t state) {
  absl::MutexLock lock(&mu_);
  if (vocabulary_ != &vocabulary) return nullptr;
  const auto it = terminals_.find(state);
  return it == terminals_.end() ? nullptr : it->second;
}

void MaskCache::StoreTerminal(const VocabularyIndex& vocabulary, int32_t state,
                              std::shared_ptr<const TerminalTable> table) {
  absl::MutexLock lock(&mu_);
  MakeRoom(vocabulary, table->bytes());
  if (terminals_.try_emplace(state, table).second) bytes_ += table->bytes();
}

std::shared_ptr<const TokenBits> MaskCache::FindStack(const VocabularyIndex& vocabulary,
                                                      const std::vector<int32_t>& contents) {
  absl::MutexLock lock(&mu_);
  if (vocabulary_ != &vocabulary) return nullptr;
  const auto it = stacks_.find(contents);
  return it == stacks_.end() ? nullptr : it->second;
}

void MaskCache::StoreStack(const VocabularyIndex& vocabulary, std::vector<int32_t> contents,
                           std::shared_ptr<const TokenBits> mask) {
  absl::MutexLock lock(&mu_);
  const size_t size = mask->size() * 8 + contents.size() * 4 + 64;
  MakeRoom(vocabulary, size);
  if (stacks_.try_emplace(std::move(contents), std::move(mask)).second) bytes_ += size;
}

size_t MaskCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

void MaskCache::MakeRoom(const VocabularyIndex& vocabulary, size_t incoming) {
  if (vocabulary_ == &vocabulary && bytes_ + incoming <= max_bytes_) return;
  terminals_.clear();
  stacks_.clear();
  bytes_ = 0;
  vocabulary_ = &vocabulary;
}

TokenBits ComputeStackMask(StackArena& arena, int32_t stack, const VocabularyIndex& vocabulary, MaskCache& cache) {
  const CompiledGrammar& grammar = arena.grammar();
  const StackFrame frame = arena.frame(stack);
  if (!grammar.InTerminal(frame.state)) return WalkTrie(arena, stack, vocabulary);
  std::shared_ptr<const TerminalTable> table = cache.FindTerminal(vocabulary, frame.state);
  if (table == nullptr) {
    table = BuildTerminalTable(grammar, frame.state, vocabulary);
    cache.StoreTerminal(vocabulary, frame.state, table);
  }
  TokenBits mask = table->inside;
  if (table->exits.empty() || frame.parent < 0) return mask;
  // Tokens that complete the terminal partway continue in the caller.
  StackSet after;
  arena.Close({frame.parent}, after);
  const std::bitset<256> allowed = arena.AllowedBytes(after);
  for (const auto& [token, offset] : table->exits) {
    if (TestBit(mask, token)) continue;
    const absl::string_view rest = vocabulary.TokenBytes(token).substr(offset);
    if (!allowed[static_cast<uint8_t>(rest.front())]) continue;
    if (Consumes(arena, after, rest)) SetBit(mask, token);
  }
  return mask;
}

}  // namespace llmc::grammar
