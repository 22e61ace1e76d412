#include "worker/service/constraint_compiler.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/json_schema_compiler.h"
#include "worker/grammar/matcher.h"
#include "worker/typed_output/constraint_grammar.h"

namespace llmc::worker {
namespace {

// A message that already begins with the field ("tools[2].function.parameters: ...") stays as it is.
absl::Status Named(const absl::Status& status, const std::string& source) {
  const absl::string_view message = status.message();
  if (absl::StartsWith(message, absl::StrCat(source, "[")) || absl::StartsWith(message, absl::StrCat(source, "."))) {
    return status;
  }
  return absl::Status(status.code(), absl::StrCat(source, ": ", message));
}

}  // namespace

ConstraintCompiler::ConstraintCompiler(const tokenizer::Tokenizer& tokenizer, std::vector<int32_t> end_token_ids,
                                       ConstraintCompilerOptions options)
    : tokenizer_(tokenizer),
      end_token_ids_(std::move(end_token_ids)),
      options_(options),
      executor_(options.threads, options.max_queued) {}

std::shared_ptr<const grammar::VocabularyIndex> ConstraintCompiler::Vocabulary(bool with_markers) {
  with_markers = with_markers && !options_.marker_tokens.empty();
  absl::MutexLock lock(&vocabulary_mu_);
  std::shared_ptr<const grammar::VocabularyIndex>& index = with_markers ? marker_vocabulary_ : vocabulary_;
  if (index == nullptr) {
    const size_t size = tokenizer_.vocab_size();
    std::vector<std::string> bytes(size);
    std::vector<bool> special(size, false);
    for (size_t id = 0; id < size; ++id) {
      bytes[id] = std::string(tokenizer_.TokenBytes(static_cast<int32_t>(id)));
      special[id] = tokenizer_.IsSpecial(static_cast<int32_t>(id));
    }
    if (with_markers) {
      for (const int32_t id : options_.marker_tokens) {
        if (id >= 0 && static_cast<size_t>(id) < size) special[id] = false;
      }
    }
    index = std::make_shared<const grammar::VocabularyIndex>(bytes, special, end_token_ids_);
  }
  return index;
}

std::shared_ptr<const ConstraintCompiler::Compiled> ConstraintCompiler::Find(const std::string& key) {
  absl::MutexLock lock(&mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->compiled;
}

void ConstraintCompiler::Store(const std::string& key, std::shared_ptr<const Compiled> compiled) {
  absl::MutexLock lock(&mu_);
  if (index_.contains(key)) return;
  const size_t bytes = 2 * key.size() + (compiled->ok() ? (**compiled)->memory_bytes() : 0);
  lru_.push_front(Entry{key, std::move(compiled), bytes});
  index_[key] = lru_.begin();
  cached_bytes_ += bytes;
  while (lru_.size() > 1 && (lru_.size() > options_.cache_entries || cached_bytes_ > options_.cache_bytes)) {
    cached_bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

// Errors are cached without the field name, which the request that hits the cache supplies (Finish).
std::shared_ptr<const ConstraintCompiler::Compiled> ConstraintCompiler::Build(const v1::OutputConstraint& constraint) {
  const absl::Time start = absl::Now();
  grammar::JsonSchemaOptions json_options;
  json_options.max_whitespace = options_.json_max_whitespace;
  absl::StatusOr<grammar::Grammar> source = typed_output::ConstraintGrammar(constraint, json_options);
  std::shared_ptr<const Compiled> compiled;
  if (!source.ok()) {
    compiled = std::make_shared<const Compiled>(source.status());
  } else {
    grammar::CompileLimits limits;
    limits.max_cache_bytes = options_.max_grammar_cache_bytes;
    Compiled automaton = grammar::CompileGrammar(*source, limits);
    if (automaton.ok()) {
      const grammar::GrammarMatcher probe(*automaton, nullptr);
      if (probe.Overflowed()) {
        automaton = absl::InvalidArgumentError(
            "the grammar is too ambiguous: its start alone has more parses than the matcher follows");
      } else if (probe.IsTerminated() && !probe.CanEnd()) {
        automaton = absl::InvalidArgumentError("the constraint matches no text at all");
      }
    }
    compiled = std::make_shared<const Compiled>(std::move(automaton));
  }
  if (observer_) observer_(absl::Now() - start);
  return compiled;
}

absl::StatusOr<engine::OutputConstraint> ConstraintCompiler::Finish(const Compiled& compiled,
                                                                    const v1::OutputConstraint& constraint) {
  const std::string& source = constraint.source();
  if (!compiled.ok()) return Named(compiled.status(), source.empty() ? "constraint" : source);
  return engine::OutputConstraint{*compiled, Vocabulary(constraint.has_tool_calls())};
}

absl::StatusOr<engine::OutputConstraint> ConstraintCompiler::CompileNow(const v1::OutputConstraint& constraint) {
  v1::OutputConstraint keyed = constraint;
  keyed.clear_source();
  const std::string key = keyed.SerializeAsString();
  std::shared_ptr<const Compiled> compiled = Find(key);
  if (compiled == nullptr) {
    compiled = Build(constraint);
    Store(key, compiled);
  }
  return Finish(*compiled, constraint);
}

void ConstraintCompiler::Compile(const v1::OutputConstraint& constraint, Done done) {
  v1::OutputConstraint keyed = constraint;
  keyed.clear_source();
  std::string key = keyed.SerializeAsString();
  if (std::shared_ptr<const Compiled> compiled = Find(key); compiled != nullptr) {
    return done(Finish(*compiled, constraint));
  }
  auto shared_done = std::make_shared<Done>(std::move(done));
  const bool queued = executor_.TrySubmit([this, constraint, key = std::move(key), shared_done] {
    std::shared_ptr<const Compiled> compiled = Find(key);
    if (compiled == nullptr) {
      compiled = Build(constraint);
      Store(key, compiled);
    }
    (*shared_done)(Finish(*compiled, constraint));
  });
  if (!queued) {
    (*shared_done)(absl::ResourceExhaustedError(
        "this worker is busy compiling other structured-output constraints; try another worker"));
  }
}

}  // namespace llmc::worker
