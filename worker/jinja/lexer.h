#ifndef LLMC_WORKER_JINJA_LEXER_H_
#define LLMC_WORKER_JINJA_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc::jinja {

enum class TokenType {
  kData,           // template text, whitespace control already applied
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // value: the literal with escapes resolved
  kInteger,
  kFloat,
  kOperator,  // value: the operator text ("+", "//", "(", ...)
  kEnd,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

struct LexerOptions {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  bool keep_trailing_newline = false;
};

// Splits a template into tokens the way jinja2's lexer does, including its whitespace control: `-` and
// `+` markers, trim_blocks, lstrip_blocks, raw blocks, and newline normalization. Comments produce no
// tokens. Errors are INVALID_ARGUMENT naming the line.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source, const LexerOptions& options);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_LEXER_H_
