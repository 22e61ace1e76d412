#include "worker/jinja/parser.h"

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/builtins.h"

namespace llmc::jinja {
namespace {

// Nesting of expressions and statements the parser accepts, so that a hostile template cannot exhaust
// the stack while it loads (or later while it renders, since evaluation recursion follows the tree).
constexpr int kMaxParseDepth = 150;
constexpr int kMaxChainLength = 256;  // operators in one left-associative chain (a + b + ...)

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  absl::StatusOr<StmtList> ParseTemplate() {
    ASSIGN_OR_RETURN(StmtList body, ParseBody({}));
    if (Current().type != TokenType::kEnd) return Unexpected();
    return body;
  }

 private:
  class DepthGuard {
   public:
    explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
    ~DepthGuard() { --*depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    int* depth_;
  };

  const Token& Current() const { return tokens_[position_]; }
  const Token& Peek(size_t ahead = 1) const { return tokens_[std::min(position_ + ahead, tokens_.size() - 1)]; }
  void Advance() {
    if (position_ + 1 < tokens_.size()) ++position_;
  }
  bool IsName(absl::string_view name) const { return Current().type == TokenType::kName && Current().value == name; }
  bool IsOperator(absl::string_view op) const {
    return Current().type == TokenType::kOperator && Current().value == op;
  }
  bool SkipName(absl::string_view name) {
    if (!IsName(name)) return false;
    Advance();
    return true;
  }
  bool SkipOperator(absl::string_view op) {
    if (!IsOperator(op)) return false;
    Advance();
    return true;
  }

  absl::Status Fail(absl::string_view message, int line) const {
    return absl::InvalidArgumentError(absl::StrCat(message, " at line ", line));
  }
  absl::Status Fail(absl::string_view message) const { return Fail(message, Current().line); }

  static std::string Describe(const Token& token) {
    switch (token.type) {
      case TokenType::kData:
        return "template data";
      case TokenType::kVariableBegin:
        return "begin of print statement";
      case TokenType::kVariableEnd:
        return "end of print statement";
      case TokenType::kBlockBegin:
        return "begin of statement block";
      case TokenType::kBlockEnd:
        return "end of statement block";
      case TokenType::kEnd:
        return "end of template";
      case TokenType::kString:
        return "string";
      case TokenType::kInteger:
        return "integer";
      case TokenType::kFloat:
        return "float";
      default:
        return token.value;
    }
  }
  absl::Status Unexpected() const { return Fail(absl::StrCat("unexpected '", Describe(Current()), "'")); }

  absl::Status ExpectOperator(absl::string_view op) {
    if (SkipOperator(op)) return absl::OkStatus();
    return Fail(absl::StrCat("expected '", op, "', got '", Describe(Current()), "'"));
  }
  absl::Status ExpectName(absl::string_view name) {
    if (SkipName(name)) return absl::OkStatus();
    return Fail(absl::StrCat("expected '", name, "', got '", Describe(Current()), "'"));
  }
  absl::StatusOr<std::string> ExpectAnyName() {
    if (Current().type != TokenType::kName) {
      return Fail(absl::StrCat("expected a name, got '", Describe(Current()), "'"));
    }
    std::string name = Current().value;
    Advance();
    return name;
  }
  absl::Status ExpectBlockEnd() {
    if (Current().type == TokenType::kBlockEnd) {
      Advance();
      return absl::OkStatus();
    }
    return Fail(absl::StrCat("expected end of statement block, got '", Describe(Current()), "'"));
  }

  // ---- statements ----

  // Statements up to a {% tag %} named in `end_tags` (left unconsumed, positioned at its name) or the end.
  absl::StatusOr<StmtList> ParseBody(std::initializer_list<absl::string_view> end_tags) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxParseDepth) return Fail("template is nested too deeply");
    StmtList body;
    while (true) {
      const Token& token = Current();
      if (token.type == TokenType::kEnd) {
        if (end_tags.size() != 0) {
          return Fail(absl::StrCat("unexpected end of template, expected '", *end_tags.begin(), "'"));
        }
        return body;
      }
      if (token.type == TokenType::kData) {
        auto stmt = NewStmt(Stmt::Kind::kText, token.line);
        stmt->text = token.value;
        body.push_back(std::move(stmt));
        Advance();
        continue;
      }
      if (token.type == TokenType::kVariableBegin) {
        Advance();
        auto stmt = NewStmt(Stmt::Kind::kOutput, token.line);
        ASSIGN_OR_RETURN(stmt->expr, ParseTuple(true, {}, false));
        if (Current().type != TokenType::kVariableEnd) return Unexpected();
        Advance();
        body.push_back(std::move(stmt));
        continue;
      }
      if (token.type != TokenType::kBlockBegin) return Unexpected();
      Advance();
      if (Current().type != TokenType::kName) return Fail("tag name expected");
      for (absl::string_view end_tag : end_tags) {
        if (Current().value == end_tag) return body;
      }
      ASSIGN_OR_RETURN(std::unique_ptr<Stmt> stmt, ParseStatement());
      if (stmt != nullptr) body.push_back(std::move(stmt));
    }
  }

  static std::unique_ptr<Stmt> NewStmt(Stmt::Kind kind, int line) {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->line = line;
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement() {
    const std::string tag = Current().value;
    const int line = Current().line;
    if (tag == "if") return ParseIf();
    if (tag == "for") return ParseFor();
    if (tag == "set") return ParseSet();
    if (tag == "macro") return ParseMacro();
    if (tag == "call") return ParseCallBlock();
    if (tag == "filter") return ParseFilterBlock();
    if (tag == "with") return ParseWith();
    if (tag == "generation") return ParseGeneration();
    if (tag == "print") {
      Advance();
      auto stmt = NewStmt(Stmt::Kind::kOutput, line);
      ASSIGN_OR_RETURN(stmt->expr, ParseTuple(true, {}, false));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return Fail(absl::StrCat("'", tag, "' outside loop"), line);
      Advance();
      RETURN_IF_ERROR(ExpectBlockEnd());
      return NewStmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
    }
    if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
        tag == "autoescape" || tag == "do" || tag == "trans") {
      return Fail(absl::StrCat("unsupported tag '", tag, "'"), line);
    }
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif") {
      return Fail(absl::StrCat("unexpected tag '", tag, "'"), line);
    }
    return Fail(absl::StrCat("unknown tag '", tag, "'"), line);
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseIf() {
    auto stmt = NewStmt(Stmt::Kind::kIf, Current().line);
    Advance();
    while (true) {
      ASSIGN_OR_RETURN(ExprPtr condition, ParseTuple(false, {}, false));
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(StmtList body, ParseBody({"elif", "else", "endif"}));
      stmt->conditions.push_back(std::move(condition));
      stmt->bodies.push_back(std::move(body));
      if (SkipName("elif")) continue;
      if (SkipName("else")) {
        RETURN_IF_ERROR(ExpectBlockEnd());
        ASSIGN_OR_RETURN(stmt->else_body, ParseBody({"endif"}));
      }
      RETURN_IF_ERROR(ExpectName("endif"));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFor() {
    auto stmt = NewStmt(Stmt::Kind::kFor, Current().line);
    Advance();
    ASSIGN_OR_RETURN(stmt->target, ParseAssignTarget(/*with_namespace=*/false));
    RETURN_IF_ERROR(ExpectName("in"));
    ASSIGN_OR_RETURN(stmt->expr, ParseTuple(false, {"recursive"}, false));
    if (SkipName("if")) {
      ASSIGN_OR_RETURN(stmt->condition, ParseExpression(true));
    }
    if (IsName("recursive")) return Fail("unsupported recursive for loop");
    RETURN_IF_ERROR(ExpectBlockEnd());
    ++loop_depth_;
    absl::StatusOr<StmtList> body = ParseBody({"endfor", "else"});
    --loop_depth_;
    if (!body.ok()) return body.status();
    stmt->body = *std::move(body);
    if (SkipName("else")) {
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(stmt->else_body, ParseBody({"endfor"}));
    }
    RETURN_IF_ERROR(ExpectName("endfor"));
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  // `name`, `a, b`, `(a, b)`, or with `with_namespace` also `ns.attribute`.
  absl::StatusOr<Target> ParseAssignTarget(bool with_namespace) {
    Target target;
    if (with_namespace && Current().type == TokenType::kName && Peek().type == TokenType::kOperator &&
        Peek().value == ".") {
      target.names.push_back(Current().value);
      Advance();
      Advance();
      ASSIGN_OR_RETURN(target.namespace_attribute, ExpectAnyName());
      return target;
    }
    const bool parenthesized = SkipOperator("(");
    while (true) {
      if (Current().type != TokenType::kName) return Fail(absl::StrCat("can't assign to '", Describe(Current()), "'"));
      target.names.push_back(Current().value);
      Advance();
      if (!SkipOperator(",")) break;
      target.is_tuple = true;
      if (parenthesized ? IsOperator(")")
                        : (IsName("in") || IsOperator("=") || Current().type == TokenType::kBlockEnd)) {
        break;
      }
    }
    if (parenthesized) RETURN_IF_ERROR(ExpectOperator(")"));
    return target;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseSet() {
    const int line = Current().line;
    Advance();
    ASSIGN_OR_RETURN(Target target, ParseAssignTarget(/*with_namespace=*/true));
    if (SkipOperator("=")) {
      auto stmt = NewStmt(Stmt::Kind::kSet, line);
      stmt->target = std::move(target);
      ASSIGN_OR_RETURN(stmt->expr, ParseTuple(true, {}, false));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
    auto stmt = NewStmt(Stmt::Kind::kSetBlock, line);
    stmt->target = std::move(target);
    if (IsOperator("|")) {
      ExprPtr input = NewExpr(Expr::Kind::kFilterInput, line);
      ASSIGN_OR_RETURN(stmt->expr, ParseFilters(std::move(input), /*start_inline=*/false));
    }
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(stmt->body, ParseBody({"endset"}));
    Advance();
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::Status ParseSignature(std::vector<MacroParameter>* parameters) {
    RETURN_IF_ERROR(ExpectOperator("("));
    while (!IsOperator(")")) {
      if (!parameters->empty()) RETURN_IF_ERROR(ExpectOperator(","));
      MacroParameter parameter;
      ASSIGN_OR_RETURN(parameter.name, ExpectAnyName());
      if (SkipOperator("=")) {
        ASSIGN_OR_RETURN(parameter.default_value, ParseExpression(true));
      } else if (!parameters->empty() && parameters->back().default_value != nullptr) {
        return Fail("non-default argument follows default argument");
      }
      parameters->push_back(std::move(parameter));
    }
    Advance();
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro() {
    auto stmt = NewStmt(Stmt::Kind::kMacro, Current().line);
    Advance();
    ASSIGN_OR_RETURN(stmt->name, ExpectAnyName());
    RETURN_IF_ERROR(ParseSignature(&stmt->parameters));
    RETURN_IF_ERROR(ExpectBlockEnd());
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    absl::StatusOr<StmtList> body = ParseBody({"endmacro"});
    loop_depth_ = saved_loop_depth;
    if (!body.ok()) return body.status();
    stmt->body = *std::move(body);
    Advance();
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseCallBlock() {
    auto stmt = NewStmt(Stmt::Kind::kCallBlock, Current().line);
    Advance();
    if (IsOperator("(")) RETURN_IF_ERROR(ParseSignature(&stmt->parameters));
    ASSIGN_OR_RETURN(stmt->expr, ParseExpression(true));
    if (stmt->expr->kind != Expr::Kind::kCall) return Fail("expected call", stmt->line);
    RETURN_IF_ERROR(ExpectBlockEnd());
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    absl::StatusOr<StmtList> body = ParseBody({"endcall"});
    loop_depth_ = saved_loop_depth;
    if (!body.ok()) return body.status();
    stmt->body = *std::move(body);
    Advance();
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFilterBlock() {
    auto stmt = NewStmt(Stmt::Kind::kFilterBlock, Current().line);
    Advance();
    ASSIGN_OR_RETURN(stmt->expr, ParseFilters(NewExpr(Expr::Kind::kFilterInput, stmt->line), /*start_inline=*/true));
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(stmt->body, ParseBody({"endfilter"}));
    Advance();
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseWith() {
    auto stmt = NewStmt(Stmt::Kind::kWith, Current().line);
    Advance();
    while (Current().type != TokenType::kBlockEnd) {
      if (!stmt->with_targets.empty()) RETURN_IF_ERROR(ExpectOperator(","));
      ASSIGN_OR_RETURN(Target target, ParseAssignTarget(/*with_namespace=*/false));
      RETURN_IF_ERROR(ExpectOperator("="));
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      stmt->with_targets.push_back(std::move(target));
      stmt->with_values.push_back(std::move(value));
    }
    Advance();
    ASSIGN_OR_RETURN(stmt->body, ParseBody({"endwith"}));
    Advance();
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  // transformers' {% generation %} marks the assistant's tokens for training masks; rendering ignores it.
  absl::StatusOr<std::unique_ptr<Stmt>> ParseGeneration() {
    auto stmt = NewStmt(Stmt::Kind::kWith, Current().line);
    Advance();
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(stmt->body, ParseBody({"endgeneration"}));
    Advance();
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  // ---- expressions ----

  static ExprPtr NewExpr(Expr::Kind kind, int line) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line;
    return expr;
  }

  bool IsTupleEnd(std::initializer_list<absl::string_view> extra_end_names) const {
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

  absl::StatusOr<ExprPtr> ParseTuple(bool with_condition, std::initializer_list<absl::string_view> extra_end_names,
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

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition) {
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

  ExprPtr MakeBinary(absl::string_view op, ExprPtr left, ExprPtr right, int line) {
    ExprPtr expr = NewExpr(Expr::Kind::kBinary, line);
    expr->name = std::string(op);
    expr->children.push_back(std::move(left));
    expr->children.push_back(std::move(right));
    return expr;
  }

  // `operand (op operand)*`, left-associative, for the operators in `ops` (keywords when `keywords`).
  absl::StatusOr<ExprPtr> ParseChain(absl::StatusOr<ExprPtr> (Parser::*parse_operand)(),
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

  absl::StatusOr<ExprPtr> ParseOr() { return ParseChain(&Parser::ParseAnd, {"or"}, true); }
  absl::StatusOr<ExprPtr> ParseAnd() { return ParseChain(&Parser::ParseNot, {"and"}, true); }

  absl::StatusOr<ExprPtr> ParseNot() {
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

  absl::StatusOr<ExprPtr> ParseCompare() {
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

  absl::StatusOr<ExprPtr> ParseMath1() { return ParseChain(&Parser::ParseConcat, {"+", "-"}, false); }
  absl::StatusOr<ExprPtr> ParseConcat() { return ParseChain(&Parser::ParseMath2, {"~"}, false); }
  absl::StatusOr<ExprPtr> ParseMath2() { return ParseChain(&Parser::ParsePow, {"*", "/", "//", "%"}, false); }
  absl::StatusOr<ExprPtr> ParsePow() { return ParseChain(&Parser::ParseFilteredUnary, {"**"}, false); }
  absl::StatusOr<ExprPtr> ParseFilteredUnary() { return ParseUnary(true); }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
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

  absl::StatusOr<ExprPtr> ParsePrimary() {
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

  absl::StatusOr<ExprPtr> ParseList() {
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

  absl::StatusOr<ExprPtr> ParseDict() {
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

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
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

  absl::StatusOr<ExprPtr> ParseFilterExpression(ExprPtr node) {
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

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node) {
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
  absl::StatusOr<ExprPtr> ParseSubscribed() {
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
  absl::Status ParseCallArguments(Expr* expr) {
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

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr call = NewExpr(Expr::Kind::kCall, Current().line);
    call->children.push_back(std::move(callee));
    RETURN_IF_ERROR(ParseCallArguments(call.get()));
    return call;
  }

  absl::StatusOr<std::string> ParseDottedName() {
    ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
    while (SkipOperator(".")) {
      ASSIGN_OR_RETURN(std::string part, ExpectAnyName());
      name += "." + part;
    }
    return name;
  }

  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool start_inline) {
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

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node) {
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
    } else if ((token.type == TokenType::kName || token.type == TokenType::kString ||
                token.type == TokenType::kInteger || token.type == TokenType::kFloat || IsOperator("[") ||
                IsOperator("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Fail("You cannot chain multiple tests with is");
      ASSIGN_OR_RETURN(ExprPtr argument, ParsePrimary());
      ASSIGN_OR_RETURN(argument, ParsePostfix(std::move(argument)));
      test->children.push_back(std::move(argument));
    }
    return test;
  }

  const std::vector<Token>& tokens_;
  size_t position_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<StmtList> ParseTokens(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace llmc::jinja
