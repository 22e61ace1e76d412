#ifndef LLMC_WORKER_GRAMMAR_REGEX_COMPILER_H_
#define LLMC_WORKER_GRAMMAR_REGEX_COMPILER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/grammar.h"

namespace llmc::grammar {

struct RegexOptions {
  // The whole output must match (vLLM's `regex`). Otherwise JSON Schema's `pattern` semantics: the pattern
  // may match anywhere in the string unless it starts with ^ or ends with $.
  bool full_match = true;
  // The text is the content of a JSON string literal: characters that JSON must escape (", \ and control
  // characters) are produced in their escaped form, and the other characters as themselves.
  bool json_string_content = false;
};

// ECMAScript / PCRE-style syntax as JSON Schema's `pattern` and vLLM's `regex` use it: literals and escapes,
// `.`, classes with ranges and negation, \d \w \s \D \W \S, \p{..} is refused, groups (capturing,
// non-capturing, named), alternation, ?, *, +, {n}, {n,}, {n,m} and their lazy forms (laziness does not
// change the language), ^ and $ at the ends. Lookaround, backreferences and anchors in the middle are
// refused with INVALID_ARGUMENT naming the construct.
absl::StatusOr<Expr> CompileRegex(absl::string_view pattern, const RegexOptions& options);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_REGEX_COMPILER_H_
