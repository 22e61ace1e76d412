#ifndef LLMC_WORKER_SERVICE_CONSTRAINT_COMPILER_H_
#define LLMC_WORKER_SERVICE_CONSTRAINT_COMPILER_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/bounded_executor.h"
#include "llmc/v1/types.pb.h"
#include "worker/engine/generation.h"
#include "worker/grammar/grammar.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::worker {

struct ConstraintCompilerOptions {
  int threads = 1;                                   // compile threads, beside the engine's
  size_t max_queued = 64;                            // compiles waiting beyond this are refused (RESOURCE_EXHAUSTED)
  size_t cache_entries = 64;                         // compiled grammars kept, least recently used out first,
  size_t cache_bytes = size_t{256} << 20;            // and their automata and constraint texts within this many bytes
  size_t max_grammar_cache_bytes = size_t{8} << 20;  // each grammar's token-mask cache
  uint32_t json_max_whitespace = 0;                  // JSON Schema and json_object: JsonSchemaOptions::max_whitespace
  // Special tokens that spell the model's tool-call and reasoning markers ([TOOL_CALLS], <|python_tag|>, ...):
  // a tool-call grammar may generate them as their text (the request then decodes them); other grammars never.
  std::vector<int32_t> marker_tokens;
};

// Turns a request's v1.OutputConstraint into an engine::OutputConstraint off the gRPC and engine threads:
// JSON Schema, regex, choice or GBNF into the grammar form, then the automaton, cached by the constraint's
// text (failures too, so a schema that is slow to refuse is refused once). The vocabulary index is built from
// the tokenizer on first use. Thread-safe.
class ConstraintCompiler {
 public:
  using Done = std::function<void(absl::StatusOr<engine::OutputConstraint>)>;

  ConstraintCompiler(const tokenizer::Tokenizer& tokenizer, std::vector<int32_t> end_token_ids,
                     ConstraintCompilerOptions options = {});

  // Calls `done` with the result: at once on a cache hit, else on a compile thread. RESOURCE_EXHAUSTED when
  // too many compiles wait.
  void Compile(const v1::OutputConstraint& constraint, Done done);
  // The same, on the calling thread.
  absl::StatusOr<engine::OutputConstraint> CompileNow(const v1::OutputConstraint& constraint);
  // Told each compile's duration (the compile-time metric).
  void set_compile_observer(std::function<void(absl::Duration)> observer) { observer_ = std::move(observer); }

 private:
  using Compiled = absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>>;

  // The vocabulary index without special tokens; with `with_markers`, the marker tokens count as text.
  std::shared_ptr<const grammar::VocabularyIndex> Vocabulary(bool with_markers);
  std::shared_ptr<const Compiled> Find(const std::string& key);
  void Store(const std::string& key, std::shared_ptr<const Compiled> compiled);
  absl::StatusOr<engine::OutputConstraint> Finish(const Compiled& compiled, const v1::OutputConstraint& constraint);
  std::shared_ptr<const Compiled> Build(const v1::OutputConstraint& constraint);

  const tokenizer::Tokenizer& tokenizer_;
  const std::vector<int32_t> end_token_ids_;
  const ConstraintCompilerOptions options_;
  std::function<void(absl::Duration)> observer_;

  absl::Mutex vocabulary_mu_;
  std::shared_ptr<const grammar::VocabularyIndex> vocabulary_ ABSL_GUARDED_BY(vocabulary_mu_);
  std::shared_ptr<const grammar::VocabularyIndex> marker_vocabulary_ ABSL_GUARDED_BY(vocabulary_mu_);

  absl::Mutex mu_;
  struct Entry {
    std::string key;
    std::shared_ptr<const Compiled> compiled;
    size_t bytes;
  };
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // newest first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;

  BoundedExecutor executor_;  // last: joined before the rest goes
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_CONSTRAINT_COMPILER_H_
