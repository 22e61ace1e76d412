// The building blocks of the tool-call grammars that are not about tools: embedding one grammar in another,
// text that avoids a marker, text that does not begin with one.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "worker/typed_output/tool_call_grammar.h"

namespace llmc::typed_output {
namespace {

using grammar::CodePointRange;
using grammar::Expr;
using grammar::Grammar;

void ShiftRuleRefs(Expr& expr, int32_t offset) {
  if (expr.kind == Expr::Kind::kRuleRef) expr.rule += offset;
  for (Expr& child : expr.children) ShiftRuleRefs(child, offset);
}

// A prefix `<base><n>_` that no rule of `host` starts with, so names made with it are new.
std::string FreshPrefix(const Grammar& host, absl::string_view base) {
  for (size_t n = host.rules.size();; ++n) {
    const std::string prefix = absl::StrCat(base, n, "_");
    const bool taken = std::any_of(host.rules.begin(), host.rules.end(),
                                   [&](const grammar::Rule& rule) { return rule.name.rfind(prefix, 0) == 0; });
    if (!taken) return prefix;
  }
}

// The code points of valid UTF-8 `text` (shortest forms, no surrogates), or nothing.
std::optional<std::vector<uint32_t>> DecodeUtf8(std::string_view text) {
  std::vector<uint32_t> out;
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    size_t length = 0;
    uint32_t code_point = 0;
    uint32_t minimum = 0;
    if (lead < 0x80) {
      length = 1, code_point = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, code_point = lead & 0x1F, minimum = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, code_point = lead & 0x0F, minimum = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, code_point = lead & 0x07, minimum = 0x10000;
    } else {
      return std::nullopt;
    }
    if (i + length > text.size()) return std::nullopt;
    for (size_t k = 1; k < length; ++k) {
      const auto byte = static_cast<uint8_t>(text[i + k]);
      if ((byte & 0xC0) != 0x80) return std::nullopt;
      code_point = (code_point << 6) | (byte & 0x3F);
    }
    if (code_point < minimum || code_point > grammar::kMaxCodePoint || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return std::nullopt;
    }
    out.push_back(code_point);
    i += length;
  }
  return out;
}

std::string EncodeUtf8(const std::vector<uint32_t>& code_points, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t c = code_points[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::vector<CodePointRange> Singles(const std::vector<uint32_t>& code_points) {
  std::vector<CodePointRange> ranges;
  for (const uint32_t c : code_points) ranges.push_back({c, c});
  return ranges;
}

}  // namespace

Expr AnyText() { return Expr::Star(Expr::NegatedCharClass({})); }

Expr EmbedGrammar(Grammar& host, const Grammar& part) {
  if (part.rules.empty()) return Expr::Nothing();
  const auto offset = static_cast<int32_t>(host.rules.size());
  const std::string prefix = FreshPrefix(host, "g");
  for (const grammar::Rule& rule : part.rules) {
    Expr body = rule.body;
    ShiftRuleRefs(body, offset);
    host.AddRule(prefix + rule.name, std::move(body));
  }
  return Expr::RuleRef(offset + part.root);
}

// The marker's Knuth-Morris-Pratt automaton over code points, as one rule per state (state i: the text's end
// matches the marker's first i code points). A state's rule reads one more code point and continues in the
// next state's rule, a tail call, so the parse stack does not grow with the text; the text may end in any
// state, and no transition reaches the full marker. State 0 loops on the code points that keep it there
// inside its own rule, so plain text costs no calls.
Expr TextWithout(Grammar& host, std::string_view marker) {
  const std::optional<std::vector<uint32_t>> decoded = DecodeUtf8(marker);
  if (!decoded.has_value()) return AnyText();  // valid UTF-8 text cannot contain it
  const std::vector<uint32_t>& m = *decoded;
  const size_t n = m.size();
  if (n == 0) return Expr::Nothing();  // every text contains the empty string
  std::vector<size_t> failure(n, 0);   // failure[i]: the longest proper border of m[0..i]
  for (size_t i = 1, k = 0; i < n; ++i) {
    while (k > 0 && m[i] != m[k]) k = failure[k - 1];
    if (m[i] == m[k]) ++k;
    failure[i] = k;
  }
  const auto next = [&](size_t state, uint32_t c) {
    while (state > 0 && m[state] != c) state = failure[state - 1];
    return m[state] == c ? state + 1 : 0;
  };
  std::vector<uint32_t> distinct(m.begin(), m.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());

  const std::string prefix = FreshPrefix(host, "text_without");
  std::vector<int32_t> rules(n);
  for (size_t i = 0; i < n; ++i) rules[i] = host.AddRule(absl::StrCat(prefix, i));
  for (size_t i = 0; i < n; ++i) {
    // The marker's code points grouped by the state they lead to; any other code point leads to state 0.
    std::map<size_t, std::vector<uint32_t>> targets;
    std::vector<uint32_t> leaving_zero;  // code points that do not lead back to state 0
    for (const uint32_t c : distinct) {
      const size_t target = next(i, c);
      if (target != 0) leaving_zero.push_back(c);
      if (target != 0 && target < n) targets[target].push_back(c);
    }
    std::vector<Expr> choices = {Expr::Empty()};
    for (auto& [target, code_points] : targets) {
      choices.push_back(Expr::Sequence({Expr::CharClass(Singles(code_points)), Expr::RuleRef(rules[target])}));
    }
    Expr to_zero = Expr::NegatedCharClass(Singles(leaving_zero));
    if (i == 0) {
      host.rules[rules[i]].body = Expr::Sequence({Expr::Star(std::move(to_zero)), Expr::Choice(std::move(choices))});
    } else {
      choices.push_back(Expr::Sequence({std::move(to_zero), Expr::RuleRef(rules[0])}));
      host.rules[rules[i]].body = Expr::Choice(std::move(choices));
    }
  }
  return Expr::RuleRef(rules[0]);
}

Expr TextNotStartingWith(std::string_view marker, const std::vector<grammar::CodePointRange>& also_not_first) {
  const std::optional<std::vector<uint32_t>> decoded = DecodeUtf8(marker);
  if (!decoded.has_value() || decoded->empty()) {
    if (also_not_first.empty()) return AnyText();
    return Expr::Choice({Expr::Empty(), Expr::Sequence({Expr::NegatedCharClass(also_not_first), AnyText()})});
  }
  const std::vector<uint32_t>& m = *decoded;
  // Either a proper prefix of the marker and nothing more, or a proper prefix then a code point that leaves
  // the marker, then anything.
  std::vector<Expr> choices;
  for (size_t i = 0; i < m.size(); ++i) {
    std::vector<CodePointRange> excluded = {{m[i], m[i]}};
    if (i == 0) excluded.insert(excluded.end(), also_not_first.begin(), also_not_first.end());
    choices.push_back(Expr::Sequence({Expr::Literal(EncodeUtf8(m, i)),
                                      Expr::Optional(Expr::Sequence({Expr::NegatedCharClass(excluded), AnyText()}))}));
  }
  return Expr::Choice(std::move(choices));
}

}  // namespace llmc::typed_output
