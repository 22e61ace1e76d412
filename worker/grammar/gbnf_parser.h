#ifndef LLMC_WORKER_GRAMMAR_GBNF_PARSER_H_
#define LLMC_WORKER_GRAMMAR_GBNF_PARSER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/grammar.h"

namespace llmc::grammar {

// A grammar in GBNF, as llama.cpp writes it: `name ::= alternatives` rules (root named "root"), string
// literals with escapes (\n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH), character classes [a-z] and [^...], `.`,
// grouping, |, ?, *, +, {n}, {n,}, {n,m}, and # comments. Errors are INVALID_ARGUMENT with a line and
// column; an undefined rule is named.
absl::StatusOr<Grammar> ParseGbnf(absl::string_view text);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_GBNF_PARSER_H_
