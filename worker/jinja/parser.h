#ifndef LLMC_WORKER_JINJA_PARSER_H_
#define LLMC_WORKER_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "worker/jinja/ast.h"
#include "worker/jinja/lexer.h"

namespace llmc::jinja {

// Builds the statement tree with jinja2's grammar and operator precedence. Constructs the interpreter
// does not implement (extends, include, import, recursive loops, unknown filters or tests, ...) are
// INVALID_ARGUMENT naming the construct and its line, so a template fails when it is loaded rather than
// when a request happens to reach the construct.
absl::StatusOr<StmtList> ParseTokens(const std::vector<Token>& tokens);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_PARSER_H_
