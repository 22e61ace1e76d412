#ifndef LLMC_WORKER_GRAMMAR_MATCHER_H_
#define LLMC_WORKER_GRAMMAR_MATCHER_H_

#include <bitset>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/grammar/automaton.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/stacks.h"
#include "worker/grammar/vocabulary.h"

namespace llmc::grammar {

// Where one sequence stands in a compiled grammar: a set of parse stacks (a pushdown automaton over bytes,
// kept nondeterministic so that any grammar without left recursion works). Not thread-safe; one per
// sequence. The compiled grammar and the vocabulary are shared and may be used by many matchers at once.
class GrammarMatcher {
 public:
  // `vocabulary` may be null for byte-level use only (AcceptBytes, AllowedNextBytes, CanEnd).
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const VocabularyIndex> vocabulary);

  // Consumes `bytes` if the grammar allows them all from here; otherwise returns false and changes nothing.
  // Counts as one step for Rollback.
  bool AcceptBytes(absl::string_view bytes);
  // AcceptBytes of the token's bytes. An end token is accepted only where the grammar may end, and then
  // terminates the matcher. Special tokens are never accepted.
  bool AcceptToken(int32_t token_id);
  // Undoes the last `steps` accepted steps (tokens or AcceptBytes calls), at most num_steps().
  void Rollback(int32_t steps);
  int32_t num_steps() const { return static_cast<int32_t>(history_.size()) - 1; }

  // The grammar may end here (the root rule is complete).
  bool CanEnd() const;
  // Nothing more can follow: an end token was accepted, or the grammar is complete and no byte may follow.
  bool IsTerminated() const;
  // The bytes that may come next.
  std::bitset<256> AllowedNextBytes() const;
  // Whether some step met the bounds on ambiguity (stacks.h) and was cut off there.
  bool Overflowed() const { return arena_->overflowed(); }

  // Sets bit t of `mask` (64 ids per word, over mask.size() * 64 ids, which may exceed the vocabulary: those
  // bits stay 0) exactly for the tokens the grammar allows next; end tokens where it may end.
  void FillMask(absl::Span<uint64_t> mask);

 private:
  struct Position {
    StackSet set;
    bool ended = false;  // an end token was accepted
  };

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const VocabularyIndex> vocabulary_;
  std::unique_ptr<StackArena> arena_;
  std::vector<Position> history_;  // history_.back() is where the matcher stands
  std::vector<int32_t> contents_;
  StackSet scratch_, scratch2_;
};

// Whether `text` is a complete sentence of `grammar` (compiled first). For tests and tools.
absl::StatusOr<bool> MatchesText(const Grammar& grammar, absl::string_view text);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_MATCHER_H_
