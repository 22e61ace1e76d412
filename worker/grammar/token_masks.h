#ifndef LLMC_WORKER_GRAMMAR_TOKEN_MASKS_H_
#define LLMC_WORKER_GRAMMAR_TOKEN_MASKS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "worker/grammar/automaton.h"
#include "worker/grammar/stacks.h"
#include "worker/grammar/vocabulary.h"

namespace llmc::grammar {

using TokenBits = std::vector<uint64_t>;  // bit t set: token t allowed

inline size_t MaskWords(size_t num_tokens) { return (num_tokens + 63) / 64; }

// What a terminal state decides over the whole vocabulary, whatever the stack below: the tokens read
// entirely inside the terminal, and those that complete it partway and must continue in the caller
// (token, bytes read inside). A JSON string's body state is the common case: almost every token stays
// inside, and only those with a closing quote depend on what surrounds the string.
struct TerminalTable {
  TokenBits inside;
  std::vector<std::pair<int32_t, uint32_t>> exits;
  size_t bytes() const { return inside.size() * 8 + exits.size() * sizeof(exits[0]); }
};

// Caches shared by all matchers of one compiled grammar (for one vocabulary): terminal tables by state,
// and whole masks by stack contents (the states from top to bottom), which recur across the steps of a
// sequence and across sequences. Bounded in bytes: full, it starts over. Thread-safe.
class MaskCache {
 public:
  explicit MaskCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  std::shared_ptr<const TerminalTable> FindTerminal(const VocabularyIndex& vocabulary, int32_t state);
  void StoreTerminal(const VocabularyIndex& vocabulary, int32_t state, std::shared_ptr<const TerminalTable> table);
  std::shared_ptr<const TokenBits> FindStack(const VocabularyIndex& vocabulary, const std::vector<int32_t>& contents);
  void StoreStack(const VocabularyIndex& vocabulary, std::vector<int32_t> contents,
                  std::shared_ptr<const TokenBits> mask);
  size_t bytes() const;

 private:
  // Empties the cache when it is for another vocabulary, or when `incoming` more bytes would not fit.
  void MakeRoom(const VocabularyIndex& vocabulary, size_t incoming) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  const VocabularyIndex* vocabulary_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<int32_t, std::shared_ptr<const TerminalTable>> terminals_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::vector<int32_t>, std::shared_ptr<const TokenBits>> stacks_ ABSL_GUARDED_BY(mu_);
};

// The terminal table of plain state `state` (what ComputeStackMask looks up or builds): one walk of the trie.
std::shared_ptr<const TerminalTable> BuildTerminalTable(const CompiledGrammar& grammar, int32_t state,
                                                        const VocabularyIndex& vocabulary);

// The tokens whose first byte one stack (a member of a closed set) reads, over the whole vocabulary.
TokenBits ComputeStackMask(StackArena& arena, int32_t stack, const VocabularyIndex& vocabulary, MaskCache& cache);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_TOKEN_MASKS_H_
