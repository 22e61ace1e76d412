#include "worker/grammar/gbnf_parser.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/grammar/utf8_sequences.h"

namespace llmc::grammar {
namespace {

// Bounds the Expr tree's depth (parentheses and stacked repetitions), since everything that walks it later
// recurses; and repetition counts, which the automaton unrolls.
constexpr int kMaxDepth = 100;
constexpr uint32_t kMaxRepeatCount = 100000;
constexpr size_t kNone = static_cast<size_t>(-1);

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Only ever called on trees already within kMaxDepth (each wrap is checked), so the recursion is bounded.
int ExprDepth(const Expr& expr) {
  int deepest = 0;
  for (const Expr& child : expr.children) deepest = std::max(deepest, ExprDepth(child));
  return deepest + 1;
}

void RemapRuleRefs(const std::vector<int32_t>& new_ids, Expr* expr) {
  if (expr->kind == Expr::Kind::kRuleRef) expr->rule = new_ids[expr->rule];
  for (Expr& child : expr->children) RemapRuleRefs(new_ids, &child);
}

class GbnfParser {
 public:
  explicit GbnfParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Grammar> Parse() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);  // a byte order mark
    SkipSpace();
    while (!AtEnd()) RETURN_IF_ERROR(ParseRule());
    return Finish();
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  std::string LineColumn(size_t offset) const {
    int line = 1;
    int column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++column;  // columns count characters, not bytes
      }
    }
    return absl::StrFormat("line %d, column %d", line, column);
  }

  absl::Status Error(size_t offset, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("GBNF ", LineColumn(offset), ": ", message));
  }

  // The character at `offset` quoted for a message: itself when printable, else as an escape.
  std::string Describe(size_t offset) const {
    uint32_t code_point = 0;
    const size_t length = DecodeUtf8Char(text_.substr(offset), &code_point);
    if (length == 0) return absl::StrFormat("byte 0x%02X", static_cast<unsigned char>(text_[offset]));
    if (code_point < 0x20 || code_point == 0x7F) return absl::StrFormat("'\\x%02X'", code_point);
    return absl::StrCat("'", text_.substr(offset, length), "'");
  }

  // Spaces, tabs, line breaks and # comments from `offset`; the offset after them.
  size_t SkipSpaceFrom(size_t offset) const {
    while (offset < text_.size()) {
      const char c = text_[offset];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++offset;
      } else if (c == '#') {
        while (offset < text_.size() && text_[offset] != '\n') ++offset;
      } else {
        break;
      }
    }
    return offset;
  }
  void SkipSpace() { pos_ = SkipSpaceFrom(pos_); }

  size_t NameEnd(size_t offset) const {
    while (offset < text_.size() && IsNameChar(text_[offset])) ++offset;
    return offset;
  }

  // Rules may span lines, so a rule body ends where the next `name ::=` begins.
  bool AtRuleStart() const {
    const size_t name_end = NameEnd(pos_);
    return name_end > pos_ && text_.substr(SkipSpaceFrom(name_end), 3) == "::=";
  }

  int32_t RuleId(absl::string_view name, size_t offset) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<int32_t>(grammar_.rules.size()));
    if (inserted) {
      grammar_.AddRule(std::string(name));
      defined_at_.push_back(kNone);
      first_use_.push_back(offset);
    }
    return it->second;
  }

  absl::Status ParseRule() {
    const size_t start = pos_;
    const size_t name_end = NameEnd(pos_);
    if (name_end == start) {
      if (Peek() == ')') return Error(start, "unmatched ')'");
      return Error(start, absl::StrCat("expected a rule name, found ", Describe(start)));
    }
    const absl::string_view name = text_.substr(start, name_end - start);
    for (size_t i = start; i > 0 && text_[i - 1] != '\n'; --i) {
      if (text_[i - 1] != ' ' && text_[i - 1] != '\t' && text_[i - 1] != '\r') {
        return Error(start, absl::StrCat("rule '", name, "' must start on a new line"));
      }
    }
    pos_ = SkipSpaceFrom(name_end);
    if (text_.substr(pos_, 3) != "::=") {
      return Error(pos_, absl::StrCat("expected '::=' after rule name '", name, "'"));
    }
    const int32_t id = RuleId(name, start);
    if (defined_at_[id] != kNone) {
      return Error(start, absl::StrCat("rule '", name, "' is already defined (", LineColumn(defined_at_[id]), ")"));
    }
    defined_at_[id] = start;
    pos_ += 3;
    SkipSpace();
    ASSIGN_OR_RETURN(Expr body, ParseAlternatives(0));
    if (Peek() == ')') return Error(pos_, "unmatched ')'");
    grammar_.rules[id].body = std::move(body);
    return absl::OkStatus();
  }

  // Ends at the end of the text, a ')', or the next rule.
  absl::StatusOr<Expr> ParseAlternatives(int depth) {
    std::vector<Expr> alternatives;
    while (true) {
      ASSIGN_OR_RETURN(Expr sequence, ParseSequence(depth));
      alternatives.push_back(std::move(sequence));
      if (Peek() != '|') break;
      ++pos_;
      SkipSpace();
    }
    return Expr::Choice(std::move(alternatives));
  }

  absl::StatusOr<Expr> ParseSequence(int depth) {
    std::vector<Expr> items;
    while (!AtEnd() && Peek() != '|' && Peek() != ')' && !AtRuleStart()) {
      ASSIGN_OR_RETURN(Expr item, ParsePrimary(depth));
      SkipSpace();
      while (Peek() == '?' || Peek() == '*' || Peek() == '+' || Peek() == '{') {
        const size_t op = pos_;
        uint32_t min = 0;
        uint32_t max = kUnbounded;
        if (Peek() == '{') {
          ASSIGN_OR_RETURN(std::tie(min, max), ParseBraces());
        } else {
          min = Peek() == '+' ? 1 : 0;
          max = Peek() == '?' ? 1 : kUnbounded;
          ++pos_;
        }
        item = Expr::Repeat(std::move(item), min, max);
        if (ExprDepth(item) > kMaxDepth) return Error(op, "expression nested too deeply");
        SkipSpace();
      }
      items.push_back(std::move(item));
    }
    return Expr::Sequence(std::move(items));
  }

  absl::StatusOr<Expr> ParsePrimary(int depth) {
    const size_t start = pos_;
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return Expr::NegatedCharClass({});
    }
    if (c == '(') {
      if (depth >= kMaxDepth) return Error(start, "parentheses nested too deeply");
      ++pos_;
      SkipSpace();
      ASSIGN_OR_RETURN(Expr group, ParseAlternatives(depth + 1));
      if (Peek() != ')') {
        return Error(pos_, absl::StrCat("expected ')' to close the '(' at ", LineColumn(start)));
      }
      ++pos_;
      if (ExprDepth(group) > kMaxDepth) return Error(start, "expression nested too deeply");
      return group;
    }
    if (IsNameChar(c)) {
      const size_t end = NameEnd(pos_);
      const absl::string_view name = text_.substr(start, end - start);
      pos_ = end;
      return Expr::RuleRef(RuleId(name, start));
    }
    if (c == '<' || (c == '!' && Peek(1) == '<')) {
      return Error(start, "token references (<[id]>, <name>, !<...>) are not supported; write the text instead");
    }
    if (c == '?' || c == '*' || c == '+' || c == '{') {
      return Error(start, absl::StrCat("'", std::string(1, c), "' has nothing before it to repeat"));
    }
    if (c == '\'') return Error(start, "string literals use double quotes");
    return Error(start, absl::StrCat("unexpected ", Describe(start)));
  }

  // {n}, {n,}, {n,m}, with spaces allowed inside.
  absl::StatusOr<std::pair<uint32_t, uint32_t>> ParseBraces() {
    ++pos_;
    SkipSpace();
    ASSIGN_OR_RETURN(const uint32_t min, ParseCount());
    SkipSpace();
    uint32_t max = min;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace();
      max = kUnbounded;
      if (Peek() >= '0' && Peek() <= '9') {
        const size_t max_start = pos_;
        ASSIGN_OR_RETURN(max, ParseCount());
        if (max < min) {
          return Error(max_start, absl::StrFormat("repetition {%d,%d} has its maximum below its minimum", min, max));
        }
        SkipSpace();
      }
    }
    if (Peek() != '}') return Error(pos_, "expected '}' to close the repetition count");
    ++pos_;
    return std::make_pair(min, max);
  }

  absl::StatusOr<uint32_t> ParseCount() {
    const size_t start = pos_;
    if (Peek() < '0' || Peek() > '9') return Error(pos_, "expected a number in the repetition count");
    uint32_t value = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      value = value * 10 + static_cast<uint32_t>(Peek() - '0');
      if (value > kMaxRepeatCount) {
        return Error(start, absl::StrFormat("repetition count above the limit of %d", kMaxRepeatCount));
      }
      ++pos_;
    }
    return value;
  }

  // One character of a literal or class: an escape, or a UTF-8 character as written.
  absl::StatusOr<uint32_t> ParseChar() {
    const size_t start = pos_;
    uint32_t code_point = 0;
    if (Peek() != '\\') {
      const size_t length = DecodeUtf8Char(text_.substr(pos_), &code_point);
      if (length == 0) return Error(start, "invalid UTF-8");
      pos_ += length;
      return code_point;
    }
    if (pos_ + 1 >= text_.size()) return Error(start, "unfinished escape sequence");
    const char escape = text_[pos_ + 1];
    pos_ += 2;
    switch (escape) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        return static_cast<uint32_t>(escape);
      case 'x':
      case 'u':
      case 'U': {
        const int digits = escape == 'x' ? 2 : escape == 'u' ? 4 : 8;
        for (int i = 0; i < digits; ++i) {
          const int digit = HexValue(Peek());
          if (digit < 0) {
            return Error(start, absl::StrFormat("\\%c needs exactly %d hex digits", escape, digits));
          }
          code_point = (code_point << 4) | static_cast<uint32_t>(digit);
          ++pos_;
        }
        if (code_point > kMaxCodePoint) {
          return Error(start, absl::StrFormat("U+%X is beyond the last Unicode code point, U+10FFFF", code_point));
        }
        return code_point;
      }
      default: {
        uint32_t ignored = 0;
        const size_t length = std::max<size_t>(1, DecodeUtf8Char(text_.substr(start + 1), &ignored));
        return Error(start, absl::StrCat("unknown escape sequence '\\", text_.substr(start + 1, length), "'"));
      }
    }
  }

  absl::StatusOr<Expr> ParseLiteral() {
    const size_t start = pos_;
    ++pos_;
    std::string bytes;
    while (true) {
      if (AtEnd()) return Error(start, "unterminated string literal");
      if (Peek() == '"') break;
      const size_t char_start = pos_;
      ASSIGN_OR_RETURN(const uint32_t code_point, ParseChar());
      if (IsSurrogate(code_point)) {
        return Error(char_start, absl::StrFormat("U+%04X is a surrogate, which UTF-8 cannot encode", code_point));
      }
      AppendUtf8(code_point, &bytes);
    }
    ++pos_;
    return Expr::Literal(bytes);
  }

  absl::StatusOr<Expr> ParseClass() {
    const size_t start = pos_;
    ++pos_;
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    std::vector<CodePointRange> ranges;
    while (true) {
      if (AtEnd()) return Error(start, "unterminated character class");
      if (Peek() == ']') break;
      const size_t char_start = pos_;
      ASSIGN_OR_RETURN(const uint32_t first, ParseChar());
      uint32_t last = first;
      if (Peek() == '-' && pos_ + 1 < text_.size() && Peek(1) != ']') {
        ++pos_;
        ASSIGN_OR_RETURN(last, ParseChar());
        if (last < first) {
          return Error(char_start, absl::StrFormat("character range U+%04X-U+%04X is backwards", first, last));
        }
      } else if (IsSurrogate(first)) {
        return Error(char_start, absl::StrFormat("U+%04X is a surrogate, which UTF-8 cannot encode", first));
      }
      ranges.push_back({first, last});
    }
    ++pos_;
    return negated ? Expr::NegatedCharClass(std::move(ranges)) : Expr::CharClass(std::move(ranges));
  }

  // Checks that every referenced rule is defined and `root` exists; puts the rules in definition order.
  absl::StatusOr<Grammar> Finish() {
    for (size_t id = 0; id < grammar_.rules.size(); ++id) {
      if (defined_at_[id] == kNone) {
        return Error(first_use_[id], absl::StrCat("undefined rule '", grammar_.rules[id].name, "'"));
      }
    }
    std::vector<int32_t> by_definition(grammar_.rules.size());
    for (size_t id = 0; id < by_definition.size(); ++id) by_definition[id] = static_cast<int32_t>(id);
    std::sort(by_definition.begin(), by_definition.end(),
              [&](int32_t a, int32_t b) { return defined_at_[a] < defined_at_[b]; });
    std::vector<int32_t> new_ids(by_definition.size());
    for (size_t i = 0; i < by_definition.size(); ++i) new_ids[by_definition[i]] = static_cast<int32_t>(i);
    Grammar ordered;
    for (const int32_t id : by_definition) {
      Rule& rule = grammar_.rules[id];
      RemapRuleRefs(new_ids, &rule.body);
      ordered.AddRule(std::move(rule.name), std::move(rule.body));
    }
    ordered.root = ordered.FindRule("root");
    if (ordered.root < 0) return absl::InvalidArgumentError("GBNF: the grammar has no rule named 'root'");
    return ordered;
  }

  absl::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
  absl::flat_hash_map<std::string, int32_t> ids_;
  std::vector<size_t> defined_at_;  // kNone until defined
  std::vector<size_t> first_use_;
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(absl::string_view text) { return GbnfParser(text).Parse(); }

}  // namespace llmc::grammar
