#ifndef LLMC_WORKER_JINJA_TOKEN_CURSOR_H_
#define LLMC_WORKER_JINJA_TOKEN_CURSOR_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "worker/jinja/lexer.h"

namespace llmc::jinja {

// Nesting of expressions and statements the parser accepts, so that a hostile template cannot exhaust
// the stack while it loads (or later while it renders, since evaluation recursion follows the tree).
inline constexpr int kMaxParseDepth = 150;
inline constexpr int kMaxChainLength = 256;  // operators in one left-associative chain (a + b + ...)

// The parser's position in the token list, with the checks and errors both its halves (statements in
// parser.cc, expressions in expression_parser.cc) use.
class TokenCursor {
 protected:
  explicit TokenCursor(const std::vector<Token>& tokens) : tokens_(tokens) {}

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

  const std::vector<Token>& tokens_;
  size_t position_ = 0;
  int depth_ = 0;
};

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_TOKEN_CURSOR_H_
