#include "worker/grammar/token_masks.h"

#include <algorithm>
#include <string>
#include <utility>

namespace llmc::grammar {
namespace {

inline void SetBit(TokenBits& bits, int32_t token) {
  bits[static_cast<size_t>(token) >> 6] |= uint64_t{1} << (token & 63);
}

void SetTokens(TokenBits& bits, const VocabularyIndex& vocabulary, const VocabularyIndex::Node& node) {
  for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) SetBit(bits, vocabulary.tokens()[k]);
}

bool HasCalls(const CompiledGrammar& grammar, int32_t state) {
  return grammar.state(state).calls_begin != grammar.state(state).calls_end;
}

// Adds every token of the subtrees of `node`'s children whose byte passes `filter` as exits at `depth`.
void AddExits(const VocabularyIndex& vocabulary, size_t node, uint32_t depth, const std::bitset<256>& filter,
              TerminalTable& table) {
  const std::vector<VocabularyIndex::Node>& nodes = vocabulary.nodes();
  for (size_t child = node + 1; child < nodes[node].subtree_end; child = nodes[child].subtree_end) {
    if (!filter[nodes[child].byte]) continue;
    const uint32_t tokens_end = nodes[nodes[child].subtree_end - 1].tokens_end;
    for (uint32_t k = nodes[child].tokens_begin; k < tokens_end; ++k) {
      table.exits.push_back({vocabulary.tokens()[k], depth});
    }
  }
}

// What a terminal table depends on, canonically numbered: the states reachable from `state` through states
// without calls, in breadth-first order, each as its exit filter when not plain, then runs of bytes with the
// same target (a number, or "dead"); states with calls appear as their exit filter only. Two states with the
// same signature have the same table, in any grammar. Empty when that part is too large to describe cheaply.
std::string PlainSignature(const CompiledGrammar& grammar, int32_t state) {
  constexpr size_t kMaxStates = 2048;
  constexpr uint32_t kDead = ~uint32_t{0};
  absl::flat_hash_map<int32_t, uint32_t> numbers = {{state, 0}};
  std::vector<int32_t> order = {state};
  std::string signature;
  const auto append = [&signature](uint32_t value) { signature.append(reinterpret_cast<const char*>(&value), 4); };
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t current = order[i];
    const bool plain = grammar.IsPlain(current);
    append(plain ? 0 : HasCalls(grammar, current) ? 2 : 1);
    if (!plain) {
      const std::bitset<256>& filter = grammar.ExitFilter(current);
      for (int word = 0; word < 8; ++word) {
        uint32_t bits = 0;
        for (int b = 0; b < 32; ++b) bits |= static_cast<uint32_t>(filter[word * 32 + b]) << b;
        append(bits);
      }
      if (HasCalls(grammar, current)) continue;
    }
    uint32_t run_target = 0;
    int run_start = 0;
    for (int byte = 0; byte <= 256; ++byte) {
      uint32_t target = kDead;
      if (byte < 256) {
        const int32_t next = grammar.Next(current, static_cast<uint8_t>(byte));
        if (next != kDeadState) {
          const auto [it, inserted] = numbers.try_emplace(next, static_cast<uint32_t>(order.size()));
          if (inserted) order.push_back(next);
          target = it->second;
        }
      }
      if (byte == 0) {
        run_target = target;
      } else if (byte == 256 || target != run_target) {
        append(run_target);
        append(static_cast<uint32_t>(byte - run_start));
        run_target = target;
        run_start = byte;
      }
    }
    if (order.size() > kMaxStates) return "";
  }
  return signature;
}

// Terminal tables shared across grammars (and requests) by vocabulary and signature: a JSON string's body,
// say, is walked once per process. Bounded; full, it starts over.
class SharedTerminalTables {
 public:
  std::shared_ptr<const TerminalTable> Find(const VocabularyIndex& vocabulary, const std::string& signature) {
    absl::MutexLock lock(&mu_);
    const auto it = tables_.find(std::make_pair(vocabulary.id(), signature));
    return it == tables_.end() ? nullptr : it->second;
  }
  void Store(const VocabularyIndex& vocabulary, std::string signature, std::shared_ptr<const TerminalTable> table) {
    constexpr size_t kMaxBytes = size_t{128} << 20;
    absl::MutexLock lock(&mu_);
    const size_t size = table->bytes() + signature.size();
    if (bytes_ + size > kMaxBytes) {
      tables_.clear();
      bytes_ = 0;
    }
    if (tables_.try_emplace(std::make_pair(vocabulary.id(), std::move(signature)), std::move(table)).second) {
      bytes_ += size;
    }
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<uint64_t, std::string>, std::shared_ptr<const TerminalTable>> tables_
      ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

SharedTerminalTables& SharedTables() {
  static SharedTerminalTables* tables = new SharedTerminalTables();
  return *tables;
}

std::shared_ptr<const TerminalTable> FindOrBuildTerminalTable(const CompiledGrammar& grammar, int32_t state,
                                                              const VocabularyIndex& vocabulary) {
  std::string signature = PlainSignature(grammar, state);
  if (signature.empty()) return BuildTerminalTable(grammar, state, vocabulary);
  std::shared_ptr<const TerminalTable> table = SharedTables().Find(vocabulary, signature);
  if (table == nullptr) {
    table = BuildTerminalTable(grammar, state, vocabulary);
    SharedTables().Store(vocabulary, std::move(signature), table);
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

// A walk position: a set of stacks, or, for one stack on a plain state, just that state (stepped by table
// lookup: the bulk of a walk through a JSON string).
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
    if (arena.grammar().IsPlain(frame.state)) {
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
    if (grammar.IsPlain(next)) {
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

// A DFA-only walk of the trie from one plain state, on through states without calls: tokens read that way are
// decided here. A token that goes on past a state that may end the rule, or that calls another, is an exit
// (left to the stack, ComputeStackMask) when its next byte passes that state's exit filter.
std::shared_ptr<const TerminalTable> BuildTerminalTable(const CompiledGrammar& grammar, int32_t state,
                                                        const VocabularyIndex& vocabulary) {
  auto table = std::make_shared<TerminalTable>();
  // One bit more than the vocabulary: where nodes without a token set theirs (VocabularyIndex::no_token).
  std::vector<uint64_t> bits(MaskWords(vocabulary.vocab_size() + 1), 0);
  uint64_t* const inside = bits.data();
  // The hot loop of a first mask: raw tables, no branch per token.
  const VocabularyIndex::Node* const nodes = vocabulary.nodes().data();
  const int32_t* const rows = grammar.rows();
  const uint8_t* const classes = grammar.byte_classes();
  const uint8_t* const plain = grammar.plain_flags();
  const size_t num_classes = grammar.num_classes();
  const size_t num_nodes = vocabulary.nodes().size();
  std::vector<int32_t> states(vocabulary.max_depth() + 1);
  states[0] = state;
  size_t i = 1;
  while (i < num_nodes) {
    const VocabularyIndex::Node& node = nodes[i];
    const uint32_t depth = node.depth;
    const int32_t next = rows[static_cast<size_t>(states[depth - 1]) * num_classes + classes[node.byte]];
    if (next == kDeadState) {
      i = node.subtree_end;
      continue;
    }
    inside[node.first_token >> 6] |= uint64_t{1} << (node.first_token & 63);
    if (node.more_tokens) {
      for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
        const int32_t token = vocabulary.tokens()[k];
        inside[static_cast<uint32_t>(token) >> 6] |= uint64_t{1} << (token & 63);
      }
    }
    if (!plain[next]) {
      AddExits(vocabulary, i, depth, grammar.ExitFilter(next), *table);
      if (HasCalls(grammar, next)) {
        i = node.subtree_end;
        continue;
      }
    }
    states[depth] = next;
    ++i;
  }
  bits.resize(MaskWords(vocabulary.vocab_size()));
  // The spare bit may share the last word with real tokens: clear it.
  const uint32_t spare = vocabulary.no_token();
  if ((spare >> 6) < bits.size()) bits[spare >> 6] &= ~(uint64_t{1} << (spare & 63));
  table->inside = std::move(bits);
  return table;
}

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
  if (!grammar.IsPlain(frame.state)) return WalkTrie(arena, stack, vocabulary);
  std::shared_ptr<const TerminalTable> table = cache.FindTerminal(vocabulary, frame.state);
  if (table == nullptr) {
    table = FindOrBuildTerminalTable(grammar, frame.state, vocabulary);
    cache.StoreTerminal(vocabulary, frame.state, table);
  }
  TokenBits mask = table->inside;
  // Exits go on from where they left the plain states, with this stack below.
  struct Continuation {
    StackSet set;
    std::bitset<256> allowed;
  };
  absl::flat_hash_map<int32_t, Continuation> continuations;
  for (const auto& [token, offset] : table->exits) {
    const absl::string_view bytes = vocabulary.TokenBytes(token);
    int32_t state = frame.state;
    for (uint32_t k = 0; k < offset; ++k) state = grammar.Next(state, static_cast<uint8_t>(bytes[k]));
    auto [it, inserted] = continuations.try_emplace(state);
    if (inserted) {
      arena.Close({arena.Intern(state, frame.parent)}, it->second.set);
      it->second.allowed = arena.AllowedBytes(it->second.set);
    }
    if (!it->second.allowed[static_cast<uint8_t>(bytes[offset])]) continue;
    if (Consumes(arena, it->second.set, bytes.substr(offset))) SetBit(mask, token);
  }
  return mask;
}

}  // namespace llmc::grammar
