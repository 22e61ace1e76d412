#include "worker/grammar/regex_charset.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llmc::grammar::regex_internal {
namespace {

CodePointSet Intersect(const CodePointSet& a, const CodePointSet& b) {
  CodePointSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint32_t first = std::max(a[i].first, b[j].first);
    const uint32_t last = std::min(a[i].last, b[j].last);
    if (first <= last) out.push_back({first, last});
    if (a[i].last < b[j].last) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

bool Contains(const CodePointSet& set, uint32_t code_point) {
  auto it = std::upper_bound(set.begin(), set.end(), code_point,
                             [](uint32_t value, const CodePointRange& range) { return value < range.first; });
  return it != set.begin() && std::prev(it)->last >= code_point;
}

// The characters JSON string content must escape: ", \ and U+0000-U+001F, in code point order.
std::vector<uint32_t> JsonEscapedCodePoints() {
  std::vector<uint32_t> out;
  for (uint32_t c = 0; c < 0x20; ++c) out.push_back(c);
  out.push_back('"');
  out.push_back('\\');
  return out;
}

// The letter of the two-character JSON escape of `code_point`, or 0 when it has none (it is \u00XX).
char ShortJsonEscape(uint32_t code_point) {
  switch (code_point) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case '\b':
      return 'b';
    case '\f':
      return 'f';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '\t':
      return 't';
    default:
      return 0;
  }
}

uint32_t LowerHexDigit(uint32_t value) { return value < 10 ? '0' + value : 'a' + (value - 10); }

// The escaped forms of `escaped` (two or more of JsonEscapedCodePoints), factored on their shared prefixes
// so that a negated class stays a handful of nodes: \ then ["\bfnrt] or u00 then [01] and a hex digit.
Expr JsonEscapeChoice(const std::vector<uint32_t>& escaped) {
  CodePointSet letters;
  CodePointSet low_digits[2];
  for (const uint32_t code_point : escaped) {
    if (const char letter = ShortJsonEscape(code_point); letter != 0) {
      letters.push_back({static_cast<uint32_t>(letter), static_cast<uint32_t>(letter)});
    } else {
      const uint32_t digit = LowerHexDigit(code_point & 0xF);
      low_digits[code_point >> 4].push_back({digit, digit});
    }
  }
  std::vector<Expr> after_backslash;
  if (!letters.empty()) after_backslash.push_back(Expr::CharClass(std::move(letters)));
  std::vector<Expr> unicode_forms;
  for (int high = 0; high < 2; ++high) {
    if (low_digits[high].empty()) continue;
    unicode_forms.push_back(
        Expr::Sequence({Expr::Literal(high == 0 ? "0" : "1"), Expr::CharClass(std::move(low_digits[high]))}));
  }
  if (!unicode_forms.empty()) {
    after_backslash.push_back(Expr::Sequence({Expr::Literal("u00"), Expr::Choice(std::move(unicode_forms))}));
  }
  return Expr::Sequence({Expr::Literal("\\"), Expr::Choice(std::move(after_backslash))});
}

}  // namespace

CodePointSet NormalizeSet(CodePointSet set) { return Expr::CharClass(std::move(set)).ranges; }

CodePointSet ComplementSet(const CodePointSet& set) { return Expr::NegatedCharClass(set).ranges; }

CodePointSet DigitSet() { return {{'0', '9'}}; }

CodePointSet WordSet() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }

CodePointSet SpaceSet() {
  return NormalizeSet({{'\t', '\r'},
                       {' ', ' '},
                       {0xA0, 0xA0},
                       {0x1680, 0x1680},
                       {0x2000, 0x200A},
                       {0x2028, 0x2029},
                       {0x202F, 0x202F},
                       {0x205F, 0x205F},
                       {0x3000, 0x3000},
                       {0xFEFF, 0xFEFF}});
}

CodePointSet DotSet() { return ComplementSet({{'\n', '\n'}}); }

absl::StatusOr<std::vector<uint32_t>> DecodeUtf8(absl::string_view text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    uint32_t code_point = 0;
    const size_t length = DecodeUtf8Char(text.substr(i), &code_point);
    if (length == 0)
      return absl::InvalidArgumentError(absl::StrCat("regex: the pattern is not valid UTF-8 at byte ", i));
    out.push_back(code_point);
    i += length;
  }
  return out;
}

std::string CharEncoder::Encode(uint32_t code_point) const {
  if (json_) {
    if (const char letter = ShortJsonEscape(code_point); letter != 0) return std::string{'\\', letter};
    if (code_point < 0x20) return absl::StrFormat("\\u%04x", code_point);
  }
  std::string out;
  AppendUtf8(code_point, &out);
  return out;
}

Expr CharEncoder::Set(const CodePointSet& unnormalized) const {
  const CodePointSet set = NormalizeSet(unnormalized);
  if (!json_) return Expr::CharClass(set);
  std::vector<uint32_t> escaped;
  for (const uint32_t code_point : JsonEscapedCodePoints()) {
    if (Contains(set, code_point)) escaped.push_back(code_point);
  }
  const CodePointSet raw = Intersect(set, ComplementSet({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  std::vector<Expr> choices;
  if (!raw.empty()) choices.push_back(Expr::CharClass(raw));
  if (escaped.size() == 1) {
    choices.push_back(Expr::Literal(Encode(escaped.front())));
  } else if (escaped.size() > 1) {
    choices.push_back(JsonEscapeChoice(escaped));
  }
  return Expr::Choice(std::move(choices));
}

Expr CharEncoder::AnyContent() const { return Expr::Star(Set({{0, kMaxCodePoint}})); }

}  // namespace llmc::grammar::regex_internal
