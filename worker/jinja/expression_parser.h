#ifndef LLMC_WORKER_JINJA_EXPRESSION_PARSER_H_
#define LLMC_WORKER_JINJA_EXPRESSION_PARSER_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/jinja/ast.h"
#include "worker/jinja/token_cursor.h"

namespace llmc::jinja {

// Expressions with jinja2's grammar and operator precedence; the statement parser (parser.cc) builds on it.
class ExpressionParser : public TokenCursor {
 protected:
  explicit ExpressionParser(const std::vector<Token>& tokens) : TokenCursor(tokens) {}

  static ExprPtr NewExpr(Expr::Kind kind, int line);
  bool IsTupleEnd(std::initializer_list<absl::string_view> extra_end_names) const;
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condition, std::initializer_list<absl::string_view> extra_end_names,
                                     bool explicit_parentheses);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition);
  ExprPtr MakeBinary(absl::string_view op, ExprPtr left, ExprPtr right, int line);
  // `operand (op operand)*`, left-associative, for the operators in `ops` (keywords when `keywords`).
  absl::StatusOr<ExprPtr> ParseChain(absl::StatusOr<ExprPtr> (ExpressionParser::*parse_operand)(),
                                     std::initializer_list<const char*> ops, bool keywords);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseFilteredUnary();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseList();
  absl::StatusOr<ExprPtr> ParseDict();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpression(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  // One subscript: an expression, or a slice `start:stop:step` with any part left out (the sliced object
  // is put in front of the children by the caller).
  absl::StatusOr<ExprPtr> ParseSubscribed();
  // Positional arguments into expr->children (after what is already there), keywords into expr->keywords.
  absl::Status ParseCallArguments(Expr* expr);
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  absl::StatusOr<std::string> ParseDottedName();
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool start_inline);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);
};

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_EXPRESSION_PARSER_H_
