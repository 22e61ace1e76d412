#include "worker/grammar/grammar.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llmc::grammar {
namespace {

constexpr uint32_t kSurrogateFirst = 0xD800;
constexpr uint32_t kSurrogateLast = 0xDFFF;

// Sorted, merged, clipped to valid scalar values.
std::vector<CodePointRange> Normalize(std::vector<CodePointRange> ranges) {
  std::vector<CodePointRange> clipped;
  for (CodePointRange range : ranges) {
    if (range.first > range.last || range.first > kMaxCodePoint) continue;
    range.last = std::min(range.last, kMaxCodePoint);
    // Cut out the surrogates.
    if (range.first < kSurrogateFirst && range.last >= kSurrogateFirst) {
      clipped.push_back({range.first, kSurrogateFirst - 1});
      if (range.last > kSurrogateLast) clipped.push_back({kSurrogateLast + 1, range.last});
    } else if (range.first >= kSurrogateFirst && range.first <= kSurrogateLast) {
      if (range.last > kSurrogateLast) clipped.push_back({kSurrogateLast + 1, range.last});
    } else {
      clipped.push_back(range);
    }
  }
  std::sort(clipped.begin(), clipped.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.first < b.first; });
  std::vector<CodePointRange> merged;
  for (const CodePointRange& range : clipped) {
    if (!merged.empty() && range.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, range.last);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

std::string EscapeCodePoint(uint32_t code_point, bool in_class) {
  if (code_point == '\\' || code_point == '"' ||
      (in_class && (code_point == ']' || code_point == '-' || code_point == '^'))) {
    return absl::StrCat("\\", std::string(1, static_cast<char>(code_point)));
  }
  if (code_point == '\n') return "\\n";
  if (code_point == '\t') return "\\t";
  if (code_point == '\r') return "\\r";
  if (code_point < 0x20 || code_point == 0x7F) return absl::StrFormat("\\x%02X", code_point);
  if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
  if (code_point <= 0xFFFF) return absl::StrFormat("\\u%04X", code_point);
  return absl::StrFormat("\\U%08X", code_point);
}

std::string EscapeLiteral(absl::string_view bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      out += c;  // UTF-8 as it is, which reads back as the same text
    } else {
      out += EscapeCodePoint(byte, false);
    }
  }
  return out + "\"";
}

}  // namespace

Expr Expr::Literal(absl::string_view bytes) {
  Expr expr;
  if (bytes.empty()) return expr;
  expr.kind = Kind::kLiteral;
  expr.literal = std::string(bytes);
  return expr;
}

Expr Expr::CharClass(std::vector<CodePointRange> ranges) {
  Expr expr;
  expr.kind = Kind::kCharClass;
  expr.ranges = Normalize(std::move(ranges));
  return expr;
}

Expr Expr::NegatedCharClass(std::vector<CodePointRange> ranges) {
  const std::vector<CodePointRange> excluded = Normalize(std::move(ranges));
  std::vector<CodePointRange> complement;
  uint32_t next = 0;
  for (const CodePointRange& range : excluded) {
    if (range.first > next) complement.push_back({next, range.first - 1});
    next = range.last + 1;
  }
  if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
  return CharClass(std::move(complement));
}

Expr Expr::RuleRef(int32_t rule) {
  Expr expr;
  expr.kind = Kind::kRuleRef;
  expr.rule = rule;
  return expr;
}

Expr Expr::Sequence(std::vector<Expr> children) {
  std::vector<Expr> kept;
  for (Expr& child : children) {
    if (child.kind == Kind::kEmpty) continue;
    if (child.kind == Kind::kSequence) {
      for (Expr& grandchild : child.children) kept.push_back(std::move(grandchild));
    } else {
      kept.push_back(std::move(child));
    }
  }
  if (kept.empty()) return Empty();
  if (kept.size() == 1) return std::move(kept.front());
  Expr expr;
  expr.kind = Kind::kSequence;
  expr.children = std::move(kept);
  return expr;
}

Expr Expr::Choice(std::vector<Expr> children) {
  if (children.size() == 1) return std::move(children.front());
  if (children.empty()) return Nothing();
  Expr expr;
  expr.kind = Kind::kChoice;
  expr.children = std::move(children);
  return expr;
}

Expr Expr::Repeat(Expr child, uint32_t min, uint32_t max) {
  if (max == 0 || child.kind == Kind::kEmpty) return Empty();
  if (min == 1 && max == 1) return child;
  Expr expr;
  expr.kind = Kind::kRepeat;
  expr.min = min;
  expr.max = max;
  expr.children.push_back(std::move(child));
  return expr;
}

int32_t Grammar::AddRule(std::string name, Expr body) {
  rules.push_back(Rule{std::move(name), std::move(body)});
  return static_cast<int32_t>(rules.size()) - 1;
}

int32_t Grammar::FindRule(absl::string_view name) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

std::string ExprToString(const Expr& expr, const Grammar& grammar) {
  switch (expr.kind) {
    case Expr::Kind::kEmpty:
      return "\"\"";
    case Expr::Kind::kLiteral:
      return EscapeLiteral(expr.literal);
    case Expr::Kind::kCharClass: {
      std::string out = "[";
      for (const CodePointRange& range : expr.ranges) {
        out += EscapeCodePoint(range.first, true);
        if (range.last != range.first) absl::StrAppend(&out, "-", EscapeCodePoint(range.last, true));
      }
      return out + "]";
    }
    case Expr::Kind::kRuleRef:
      if (expr.rule >= 0 && static_cast<size_t>(expr.rule) < grammar.rules.size()) {
        return grammar.rules[expr.rule].name;
      }
      return absl::StrCat("<rule ", expr.rule, ">");
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice: {
      std::string out = "(";
      for (size_t i = 0; i < expr.children.size(); ++i) {
        if (i > 0) out += expr.kind == Expr::Kind::kSequence ? " " : " | ";
        out += ExprToString(expr.children[i], grammar);
      }
      return out + ")";
    }
    case Expr::Kind::kRepeat: {
      std::string out = ExprToString(expr.children.front(), grammar);
      if (expr.max == kUnbounded) {
        if (expr.min == 0) return out + "*";
        if (expr.min == 1) return out + "+";
        return absl::StrCat(out, "{", expr.min, ",}");
      }
      if (expr.min == 0 && expr.max == 1) return out + "?";
      if (expr.min == expr.max) return absl::StrCat(out, "{", expr.min, "}");
      return absl::StrCat(out, "{", expr.min, ",", expr.max, "}");
    }
  }
  return "";
}

std::string Grammar::ToString() const {
  std::string out;
  for (size_t i = 0; i < rules.size(); ++i) {
    absl::StrAppend(&out, rules[i].name, static_cast<int32_t>(i) == root ? " (root)" : "",
                    " ::= ", ExprToString(rules[i].body, *this), "\n");
  }
  return out;
}

}  // namespace llmc::grammar
