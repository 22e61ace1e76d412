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
#include "worker/jinja/expression_parser.h"

namespace llmc::jinja {
namespace {

class Parser : public ExpressionParser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : ExpressionParser(tokens) {}

  absl::StatusOr<StmtList> ParseTemplate() {
    ASSIGN_OR_RETURN(StmtList body, ParseBody({}));
    if (Current().type != TokenType::kEnd) return Unexpected();
    return body;
  }

 private:
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

  // The body of a macro or call block through its end tag. A loop around the definition is not the
  // body's: break and continue there are errors.
  absl::Status ParseFunctionBody(absl::string_view end_tag, Stmt& stmt) {
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    absl::StatusOr<StmtList> body = ParseBody({end_tag});
    loop_depth_ = saved_loop_depth;
    if (!body.ok()) return body.status();
    stmt.body = *std::move(body);
    Advance();
    return ExpectBlockEnd();
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro() {
    auto stmt = NewStmt(Stmt::Kind::kMacro, Current().line);
    Advance();
    ASSIGN_OR_RETURN(stmt->name, ExpectAnyName());
    RETURN_IF_ERROR(ParseSignature(&stmt->parameters));
    RETURN_IF_ERROR(ExpectBlockEnd());
    RETURN_IF_ERROR(ParseFunctionBody("endmacro", *stmt));
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseCallBlock() {
    auto stmt = NewStmt(Stmt::Kind::kCallBlock, Current().line);
    Advance();
    if (IsOperator("(")) RETURN_IF_ERROR(ParseSignature(&stmt->parameters));
    ASSIGN_OR_RETURN(stmt->expr, ParseExpression(true));
    if (stmt->expr->kind != Expr::Kind::kCall) return Fail("expected call", stmt->line);
    RETURN_IF_ERROR(ExpectBlockEnd());
    RETURN_IF_ERROR(ParseFunctionBody("endcall", *stmt));
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

  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<StmtList> ParseTokens(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace llmc::jinja
