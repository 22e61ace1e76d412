#include "worker/jinja/expression_parser.h"

#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/builtins.h"

namespace llmc::jinja {

ExprPtr ExpressionParser::NewExpr(Expr::Kind kind, int line) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->line = line;
  return expr;
}

bool ExpressionParser::IsTupleEnd(std::initializer_list<absl::string_view> extra_end_names) const {
  const Token& token = Current();
  if (token.type == TokenType::kVariableEnd || token.type == TokenType::kBlockEnd || token.type == TokenType::kEnd) {
    return true;
  }
  if (token.type == TokenType::kOperator && token.value == ")") return true;
  if (token.type == TokenType::kName) {
    for (absl::string_view name : extra_end_names) {
      if (token.value == name) return true;
    }
  }
  return false;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTuple(bool with_condition,
                                                     std::initializer_list<absl::string_view> extra_end_names,
                                                     bool explicit_parentheses) {
  const int line = Current().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) RETURN_IF_ERROR(ExpectOperator(","));
    if (IsTupleEnd(extra_end_names)) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condition));
    items.push_back(std::move(item));
    if (IsOperator(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) return Fail(absl::StrCat("Expected an expression, got '", Describe(Current()), "'"));
  }
  ExprPtr tuple = NewExpr(Expr::Kind::kTuple, line);
  tuple->children = std::move(items);
  return tuple;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condition) {
  DepthGuard guard(&depth_);
  if (depth_ > kMaxParseDepth) return Fail("expression is nested too deeply");
  if (!with_condition) return ParseOr();
  ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (IsName("if")) {
    const int line = Current().line;
    Advance();
    ExprPtr condition_expr = NewExpr(Expr::Kind::kCondition, line);
    ASSIGN_OR_RETURN(ExprPtr condition, ParseOr());
    condition_expr->children.push_back(std::move(condition));
    condition_expr->children.push_back(std::move(expr));
    if (SkipName("else")) {
      ASSIGN_OR_RETURN(ExprPtr otherwise, ParseExpression(true));
      condition_expr->children.push_back(std::move(otherwise));
    } else {
      condition_expr->children.push_back(nullptr);
    }
    expr = std::move(condition_expr);
  }
  return expr;
}

ExprPtr ExpressionParser::MakeBinary(absl::string_view op, ExprPtr left, ExprPtr right, int line) {
  ExprPtr expr = NewExpr(Expr::Kind::kBinary, line);
  expr->name = std::string(op);
  expr->children.push_back(std::move(left));
  expr->children.push_back(std::move(right));
  return expr;
}

// `operand (op operand)*`, left-associative, for the operators in `ops` (keywords when `keywords`).
absl::StatusOr<ExprPtr> ExpressionParser::ParseChain(absl::StatusOr<ExprPtr> (ExpressionParser::*parse_operand)(),
                                                     std::initializer_list<const char*> ops, bool keywords) {
  ASSIGN_OR_RETURN(ExprPtr left, (this->*parse_operand)());
  for (int length = 1;; ++length) {
    const char* op = nullptr;
    for (const char* candidate : ops) {
      if (keywords ? IsName(candidate) : IsOperator(candidate)) {
        op = candidate;
        break;
      }
    }
    if (op == nullptr) return left;
    // Each link makes the tree one level deeper, and evaluating and freeing it recurse that deep.
    if (length > kMaxChainLength) return Fail("expression chain is too long");
    const int line = Current().line;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr right, (this->*parse_operand)());
    left = MakeBinary(op, std::move(left), std::move(right), line);
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseOr() { return ParseChain(&ExpressionParser::ParseAnd, {"or"}, true); }

absl::StatusOr<ExprPtr> ExpressionParser::ParseAnd() { return ParseChain(&ExpressionParser::ParseNot, {"and"}, true); }

absl::StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxParseDepth) return Fail("expression is nested too deeply");
    ExprPtr expr = NewExpr(Expr::Kind::kUnary, Current().line);
    expr->name = "not";
    Advance();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    expr->children.push_back(std::move(operand));
    return expr;
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
  const int line = Current().line;
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr compare;
  while (true) {
    std::string op;
    const Token& token = Current();
    if (token.type == TokenType::kOperator && (token.value == "==" || token.value == "!=" || token.value == "<" ||
                                               token.value == "<=" || token.value == ">" || token.value == ">=")) {
      op = token.value;
      Advance();
    } else if (IsName("in")) {
      op = "in";
      Advance();
    } else if (IsName("not") && Peek().type == TokenType::kName && Peek().value == "in") {
      op = "notin";
      Advance();
      Advance();
    } else {
      break;
    }
    if (compare == nullptr) {
      compare = NewExpr(Expr::Kind::kCompare, line);
      compare->children.push_back(std::move(first));
    }
    ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    compare->ops.push_back(op);
    compare->children.push_back(std::move(operand));
  }
  if (compare == nullptr) return first;
  return compare;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath1() {
  return ParseChain(&ExpressionParser::ParseConcat, {"+", "-"}, false);
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseConcat() {
  return ParseChain(&ExpressionParser::ParseMath2, {"~"}, false);
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath2() {
  return ParseChain(&ExpressionParser::ParsePow, {"*", "/", "//", "%"}, false);
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePow() {
  return ParseChain(&ExpressionParser::ParseFilteredUnary, {"**"}, false);
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilteredUnary() { return ParseUnary(true); }

absl::StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  DepthGuard guard(&depth_);
  if (depth_ > kMaxParseDepth) return Fail("expression is nested too deeply");
  ExprPtr node;
  if (IsOperator("-") || IsOperator("+")) {
    node = NewExpr(Expr::Kind::kUnary, Current().line);
    node->name = Current().value;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node->children.push_back(std::move(operand));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpression(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& token = Current();
  const int line = token.line;
  switch (token.type) {
    case TokenType::kName: {
      ExprPtr expr;
      if (token.value == "true" || token.value == "True" || token.value == "false" || token.value == "False") {
        expr = NewExpr(Expr::Kind::kConstant, line);
        expr->constant = Value::Bool(token.value == "true" || token.value == "True");
      } else if (token.value == "none" || token.value == "None") {
        expr = NewExpr(Expr::Kind::kConstant, line);
        expr->constant = Value::None();
      } else {
        expr = NewExpr(Expr::Kind::kName, line);
        expr->name = token.value;
      }
      Advance();
      return expr;
    }
    case TokenType::kString: {
      std::string text;
      while (Current().type == TokenType::kString) {
        text += Current().value;
        Advance();
      }
      ExprPtr expr = NewExpr(Expr::Kind::kConstant, line);
      expr->constant = Value::String(std::move(text));
      return expr;
    }
    case TokenType::kInteger: {
      int64_t value;
      if (!absl::SimpleAtoi(token.value, &value)) return Fail("integer literal too large");
      ExprPtr expr = NewExpr(Expr::Kind::kConstant, line);
      expr->constant = Value::Int(value);
      Advance();
      return expr;
    }
    case TokenType::kFloat: {
      errno = 0;
      const double value = std::strtod(token.value.c_str(), nullptr);
      ExprPtr expr = NewExpr(Expr::Kind::kConstant, line);
      expr->constant = Value::Float(value);
      Advance();
      return expr;
    }
    case TokenType::kOperator:
      if (token.value == "(") {
        Advance();
        ASSIGN_OR_RETURN(ExprPtr expr, ParseTuple(true, {}, true));
        RETURN_IF_ERROR(ExpectOperator(")"));
        return expr;
      }
      if (token.value == "[") return ParseList();
      if (token.value == "{") return ParseDict();
      break;
    default:
      break;
  }
  return Unexpected();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseList() {
  ExprPtr list = NewExpr(Expr::Kind::kList, Current().line);
  Advance();
  while (!IsOperator("]")) {
    if (!list->children.empty()) {
      RETURN_IF_ERROR(ExpectOperator(","));
      if (IsOperator("]")) break;
    }
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
    list->children.push_back(std::move(item));
  }
  Advance();
  return list;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseDict() {
  ExprPtr dict = NewExpr(Expr::Kind::kDict, Current().line);
  Advance();
  while (!IsOperator("}")) {
    if (!dict->children.empty()) {
      RETURN_IF_ERROR(ExpectOperator(","));
      if (IsOperator("}")) break;
    }
    ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
    RETURN_IF_ERROR(ExpectOperator(":"));
    ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    dict->children.push_back(std::move(key));
    dict->children.push_back(std::move(value));
  }
  Advance();
  return dict;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  for (int length = 0;; ++length) {
    if (length > kMaxChainLength) return Fail("expression chain is too long");
    if (IsOperator(".") || IsOperator("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOperator("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilterExpression(ExprPtr node) {
  for (int length = 0;; ++length) {
    if (length > kMaxChainLength) return Fail("expression chain is too long");
    if (IsOperator("|")) {
      ASSIGN_OR_RETURN(node, ParseFilters(std::move(node), false));
    } else if (IsName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOperator("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  const int line = Current().line;
  if (SkipOperator(".")) {
    const Token& token = Current();
    if (token.type == TokenType::kName) {
      ExprPtr expr = NewExpr(Expr::Kind::kGetAttr, line);
      expr->name = token.value;
      expr->children.push_back(std::move(node));
      Advance();
      return expr;
    }
    if (token.type != TokenType::kInteger) return Fail("expected name or number");
    ExprPtr index = NewExpr(Expr::Kind::kConstant, token.line);
    int64_t value;
    if (!absl::SimpleAtoi(token.value, &value)) return Fail("integer literal too large");
    index->constant = Value::Int(value);
    Advance();
    ExprPtr expr = NewExpr(Expr::Kind::kGetItem, line);
    expr->children.push_back(std::move(node));
    expr->children.push_back(std::move(index));
    return expr;
  }
  Advance();  // [
  std::vector<ExprPtr> arguments;
  while (!IsOperator("]")) {
    if (!arguments.empty()) RETURN_IF_ERROR(ExpectOperator(","));
    ASSIGN_OR_RETURN(ExprPtr argument, ParseSubscribed());
    arguments.push_back(std::move(argument));
  }
  Advance();
  if (arguments.empty()) return Fail("expected subscript expression", line);
  ExprPtr subscript;
  if (arguments.size() == 1) {
    subscript = std::move(arguments[0]);
  } else {
    subscript = NewExpr(Expr::Kind::kTuple, line);
    subscript->children = std::move(arguments);
  }
  if (subscript->kind == Expr::Kind::kSlice) {
    subscript->children.insert(subscript->children.begin(), std::move(node));
    return subscript;
  }
  ExprPtr expr = NewExpr(Expr::Kind::kGetItem, line);
  expr->children.push_back(std::move(node));
  expr->children.push_back(std::move(subscript));
  return expr;
}

// One subscript: an expression, or a slice `start:stop:step` with any part left out (the sliced object
// is put in front of the children by the caller).
absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscribed() {
  const int line = Current().line;
  ExprPtr slice = NewExpr(Expr::Kind::kSlice, line);
  if (IsOperator(":")) {
    Advance();
    slice->children.push_back(nullptr);
  } else {
    ASSIGN_OR_RETURN(ExprPtr start, ParseExpression(true));
    if (!IsOperator(":")) return start;
    Advance();
    slice->children.push_back(std::move(start));
  }
  if (IsOperator(":") || IsOperator("]") || IsOperator(",")) {
    slice->children.push_back(nullptr);
  } else {
    ASSIGN_OR_RETURN(ExprPtr stop, ParseExpression(true));
    slice->children.push_back(std::move(stop));
  }
  if (SkipOperator(":") && !IsOperator("]") && !IsOperator(",")) {
    ASSIGN_OR_RETURN(ExprPtr step, ParseExpression(true));
    slice->children.push_back(std::move(step));
  } else {
    slice->children.push_back(nullptr);
  }
  return slice;
}

// Positional arguments into expr->children (after what is already there), keywords into expr->keywords.
absl::Status ExpressionParser::ParseCallArguments(Expr* expr) {
  const int line = Current().line;
  RETURN_IF_ERROR(ExpectOperator("("));
  bool need_comma = false;
  while (!IsOperator(")")) {
    if (need_comma) {
      RETURN_IF_ERROR(ExpectOperator(","));
      if (IsOperator(")")) break;
    }
    if (IsOperator("*") || IsOperator("**")) return Fail("unsupported *args or **kwargs in a call");
    if (Current().type == TokenType::kName && Peek().type == TokenType::kOperator && Peek().value == "=") {
      Keyword keyword;
      keyword.name = Current().value;
      Advance();
      Advance();
      ASSIGN_OR_RETURN(keyword.value, ParseExpression(true));
      expr->keywords.push_back(std::move(keyword));
    } else {
      if (!expr->keywords.empty()) return Fail("invalid syntax for function call expression", line);
      ASSIGN_OR_RETURN(ExprPtr argument, ParseExpression(true));
      expr->children.push_back(std::move(argument));
    }
    need_comma = true;
  }
  Advance();
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr callee) {
  ExprPtr call = NewExpr(Expr::Kind::kCall, Current().line);
  call->children.push_back(std::move(callee));
  RETURN_IF_ERROR(ParseCallArguments(call.get()));
  return call;
}

absl::StatusOr<std::string> ExpressionParser::ParseDottedName() {
  ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
  while (SkipOperator(".")) {
    ASSIGN_OR_RETURN(std::string part, ExpectAnyName());
    name += "." + part;
  }
  return name;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilters(ExprPtr node, bool start_inline) {
  for (int length = 0; IsOperator("|") || start_inline; ++length) {
    if (length > kMaxChainLength) return Fail("expression chain is too long");
    if (!start_inline) Advance();
    start_inline = false;
    const int line = Current().line;
    ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    if (!IsKnownFilter(name)) return Fail(absl::StrCat("unsupported filter '", name, "'"), line);
    ExprPtr filter = NewExpr(Expr::Kind::kFilter, line);
    filter->name = name;
    filter->children.push_back(std::move(node));
    if (IsOperator("(")) RETURN_IF_ERROR(ParseCallArguments(filter.get()));
    node = std::move(filter);
  }
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr node) {
  const int line = Current().line;
  Advance();  // is
  ExprPtr test = NewExpr(Expr::Kind::kTest, line);
  test->negated = SkipName("not");
  ASSIGN_OR_RETURN(test->name, ParseDottedName());
  if (!IsKnownTest(test->name)) return Fail(absl::StrCat("unsupported test '", test->name, "'"), line);
  test->children.push_back(std::move(node));
  const Token& token = Current();
  if (IsOperator("(")) {
    RETURN_IF_ERROR(ParseCallArguments(test.get()));
  } else if ((token.type == TokenType::kName || token.type == TokenType::kString || token.type == TokenType::kInteger ||
              token.type == TokenType::kFloat || IsOperator("[") || IsOperator("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Fail("You cannot chain multiple tests with is");
    ASSIGN_OR_RETURN(ExprPtr argument, ParsePrimary());
    ASSIGN_OR_RETURN(argument, ParsePostfix(std::move(argument)));
    test->children.push_back(std::move(argument));
  }
  return test;
}

}  // namespace llmc::jinja
