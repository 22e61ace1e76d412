#include "worker/grammar/regex_compiler.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/grammar/regex_charset.h"
#include "worker/grammar/utf8_sequences.h"

namespace llmc::grammar {
namespace {

using regex_internal::CharEncoder;
using regex_internal::CodePointSet;

constexpr uint32_t kMaxRepeatBound = 10000;
// Bounds the parser's recursion on nested groups.
constexpr int kMaxGroupDepth = 500;
// Peek's answer past the end of the pattern: not a code point.
constexpr uint32_t kEnd = 0xFFFFFFFF;

// One top-level alternative and whether ^ and $ anchor its ends.
struct Branch {
  Expr expr;
  bool anchored_start = false;
  bool anchored_end = false;
};

// What an escape or a class member denotes: one code point, or a set of them (\d, \w, ...).
struct Atom {
  bool is_set = false;
  uint32_t code_point = 0;
  CodePointSet set;
};

struct Quantifier {
  uint32_t min = 0;
  uint32_t max = 0;
};

bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

int HexValue(uint32_t c) {
  if (IsDigit(c)) return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

class RegexParser {
 public:
  RegexParser(std::vector<uint32_t> text, const RegexOptions& options)
      : text_(std::move(text)), encoder_(options.json_string_content) {}

  absl::StatusOr<std::vector<Branch>> ParsePattern() {
    std::vector<Branch> branches;
    do {
      Branch branch;
      absl::StatusOr<Expr> expr = ParseSequence(&branch);
      if (!expr.ok()) return expr.status();
      branch.expr = *std::move(expr);
      branches.push_back(std::move(branch));
    } while (Consume('|'));
    if (!AtEnd()) return Error("unmatched )");
    return branches;
  }

  const CharEncoder& encoder() const { return encoder_; }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  uint32_t Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : kEnd; }
  bool Consume(uint32_t c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  std::string Text(size_t begin, size_t end) const {
    std::string out;
    for (size_t i = begin; i < end && i < text_.size(); ++i) AppendUtf8(text_[i], &out);
    return out;
  }
  absl::Status Error(absl::string_view what) const { return ErrorAt(what, pos_); }
  absl::Status ErrorAt(absl::string_view what, size_t at) const {
    return absl::InvalidArgumentError(absl::StrCat("regex: ", what, " (at character ", at, ")"));
  }

  // A group's body: alternatives up to its ')'.
  absl::StatusOr<Expr> ParseAlternation() {
    std::vector<Expr> alternatives;
    do {
      absl::StatusOr<Expr> expr = ParseSequence(nullptr);
      if (!expr.ok()) return expr.status();
      alternatives.push_back(*std::move(expr));
    } while (Consume('|'));
    return Expr::Choice(std::move(alternatives));
  }

  // Atoms and their quantifiers up to '|', ')' or the end. `top` is set for a top-level alternative, the
  // only place anchors may stand (at its ends); it records them.
  absl::StatusOr<Expr> ParseSequence(Branch* top) {
    std::vector<Expr> items;
    if (top != nullptr) {
      while (Consume('^')) top->anchored_start = true;
    }
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '^') {
        return Error(
            "the anchor ^ away from the start of the pattern (or of a top-level alternative) is not supported");
      }
      if (Peek() == '$') {
        const size_t anchor = pos_;
        while (Consume('$')) {
        }
        if (top != nullptr && (AtEnd() || Peek() == '|')) {
          top->anchored_end = true;
          break;
        }
        return ErrorAt("the anchor $ away from the end of the pattern (or of a top-level alternative) is not supported",
                       anchor);
      }
      absl::StatusOr<Expr> atom = ParseAtom();
      if (!atom.ok()) return atom.status();
      absl::StatusOr<std::optional<Quantifier>> quantifier = ParseQuantifier();
      if (!quantifier.ok()) return quantifier.status();
      Expr item = *std::move(atom);
      if (quantifier->has_value()) item = Expr::Repeat(std::move(item), (*quantifier)->min, (*quantifier)->max);
      if (item.kind == Expr::Kind::kLiteral && !items.empty() && items.back().kind == Expr::Kind::kLiteral) {
        items.back().literal += item.literal;
      } else {
        items.push_back(std::move(item));
      }
    }
    return Expr::Sequence(std::move(items));
  }

  absl::StatusOr<Expr> ParseAtom() {
    const uint32_t c = Peek();
    switch (c) {
      case '(':
        return ParseGroup();
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return encoder_.Set(regex_internal::DotSet());
      case '\\': {
        ++pos_;
        absl::StatusOr<Atom> atom = ParseEscape(/*in_class=*/false);
        if (!atom.ok()) return atom.status();
        return AtomExpr(*atom);
      }
      case '*':
      case '+':
      case '?':
        return Error(absl::StrCat("the quantifier ", Text(pos_, pos_ + 1), " has nothing to repeat"));
      case '{':
        // ECMAScript reads a '{' that does not open a quantifier as itself.
        if (BracedQuantifierLength() > 0) return Error("the quantifier {...} has nothing to repeat");
        break;
      default:
        break;
    }
    ++pos_;
    return Expr::Literal(encoder_.Encode(c));
  }

  Expr AtomExpr(const Atom& atom) const {
    return atom.is_set ? encoder_.Set(atom.set) : Expr::Literal(encoder_.Encode(atom.code_point));
  }

  // The length of the {n}, {n,} or {n,m} at the current position, or 0 when there is none.
  size_t BracedQuantifierLength() const {
    size_t i = 0;
    if (Peek(i++) != '{') return 0;
    const size_t digits_begin = i;
    while (IsDigit(Peek(i))) ++i;
    if (i == digits_begin) return 0;
    if (Peek(i) == ',') {
      ++i;
      while (IsDigit(Peek(i))) ++i;
    }
    return Peek(i) == '}' ? i + 1 : 0;
  }

  // A bound of a braced quantifier; advances past its digits.
  absl::StatusOr<uint32_t> ParseBound() {
    const size_t begin = pos_;
    uint64_t value = 0;
    while (IsDigit(Peek())) {
      value = std::min<uint64_t>(value * 10 + (Peek() - '0'), uint64_t{kMaxRepeatBound} + 1);
      ++pos_;
    }
    if (value > kMaxRepeatBound) {
      return ErrorAt(
          absl::StrCat("the quantifier bound ", Text(begin, pos_), " exceeds the limit of ", kMaxRepeatBound), begin);
    }
    return static_cast<uint32_t>(value);
  }

  // The quantifier after an atom, if any, with its lazy (?) or possessive (+) suffix, which leave the
  // language as it is.
  absl::StatusOr<std::optional<Quantifier>> ParseQuantifier() {
    Quantifier quantifier;
    const size_t begin = pos_;
    if (Consume('*')) {
      quantifier = {0, kUnbounded};
    } else if (Consume('+')) {
      quantifier = {1, kUnbounded};
    } else if (Consume('?')) {
      quantifier = {0, 1};
    } else if (BracedQuantifierLength() > 0) {
      ++pos_;  // {
      absl::StatusOr<uint32_t> min = ParseBound();
      if (!min.ok()) return min.status();
      quantifier = {*min, *min};
      if (Consume(',')) {
        quantifier.max = kUnbounded;
        if (IsDigit(Peek())) {
          absl::StatusOr<uint32_t> max = ParseBound();
          if (!max.ok()) return max.status();
          quantifier.max = *max;
        }
      }
      ++pos_;  // }
      if (quantifier.max < quantifier.min) {
        return ErrorAt(absl::StrCat("the quantifier ", Text(begin, pos_), " has its bounds out of order"), begin);
      }
    } else {
      return std::nullopt;
    }
    if (!Consume('?')) Consume('+');
    return quantifier;
  }

  absl::StatusOr<Expr> ParseGroup() {
    const size_t open = pos_++;
    if (Consume('?')) {
      const uint32_t c = Peek();
      if (c == ':') {
        ++pos_;
      } else if (c == '=' || c == '!') {
        return ErrorAt(absl::StrCat("lookahead (?", Text(pos_, pos_ + 1), " is not supported"), open);
      } else if (c == '<' && (Peek(1) == '=' || Peek(1) == '!')) {
        return ErrorAt(absl::StrCat("lookbehind (?<", Text(pos_ + 1, pos_ + 2), " is not supported"), open);
      } else if (c == '<') {
        ++pos_;
        if (absl::Status status = ParseGroupName(); !status.ok()) return status;
      } else if (c == 'P' && Peek(1) == '<') {
        pos_ += 2;
        if (absl::Status status = ParseGroupName(); !status.ok()) return status;
      } else if (c == 'P' && Peek(1) == '=') {
        return ErrorAt("the backreference (?P=name) is not supported", open);
      } else if (c == '>') {
        return ErrorAt("the atomic group (?> is not supported", open);
      } else if (IsAsciiLetter(c) || c == '-') {
        size_t end = pos_;
        while (end < text_.size() && (IsAsciiLetter(text_[end]) || text_[end] == '-')) ++end;
        return ErrorAt(absl::StrCat("inline flags (?", Text(pos_, end), ") are not supported"), open);
      } else {
        return ErrorAt(absl::StrCat("the group syntax (?", Text(pos_, pos_ + 1), " is not supported"), open);
      }
    }
    if (++depth_ > kMaxGroupDepth) return Error(absl::StrCat("groups nest deeper than ", kMaxGroupDepth));
    absl::StatusOr<Expr> body = ParseAlternation();
    --depth_;
    if (!body.ok()) return body.status();
    if (!Consume(')')) return ErrorAt("missing ) to close this group", open);
    return body;
  }

  // The name of a named group and its closing '>'.
  absl::Status ParseGroupName() {
    const size_t begin = pos_;
    while (!AtEnd() && Peek() != '>') {
      const uint32_t c = Peek();
      const bool valid = c == '_' || c == '$' || IsAsciiLetter(c) || c >= 0x80 || (pos_ > begin && IsDigit(c));
      if (!valid) return Error("invalid group name");
      ++pos_;
    }
    if (pos_ == begin || !Consume('>')) return ErrorAt("invalid group name", begin);
    return absl::OkStatus();
  }

  absl::StatusOr<Expr> ParseClass() {
    const size_t open = pos_++;
    const bool negated = Consume('^');
    CodePointSet set;
    // ECMAScript: a ']' right after '[' or '[^' closes the class ([] matches nothing, [^] anything).
    while (!Consume(']')) {
      if (AtEnd()) return ErrorAt("missing ] to close this character class", open);
      const size_t low_begin = pos_;
      absl::StatusOr<Atom> low = ParseClassAtom();
      if (!low.ok()) return low.status();
      if (low->is_set || Peek() != '-' || Peek(1) == ']' || Peek(1) == kEnd) {
        AddAtom(*low, &set);
        continue;
      }
      const size_t dash = pos_++;
      absl::StatusOr<Atom> high = ParseClassAtom();
      if (!high.ok()) return high.status();
      if (high->is_set) {
        // ECMAScript (Annex B) reads [a-\d] as a, '-' and the digits.
        AddAtom(*low, &set);
        set.push_back({'-', '-'});
        AddAtom(*high, &set);
      } else if (high->code_point < low->code_point) {
        return ErrorAt(absl::StrCat("the class range ", Text(low_begin, pos_), " is out of order"), dash);
      } else {
        set.push_back({low->code_point, high->code_point});
      }
    }
    set = regex_internal::NormalizeSet(std::move(set));
    return encoder_.Set(negated ? regex_internal::ComplementSet(set) : set);
  }

  static void AddAtom(const Atom& atom, CodePointSet* set) {
    if (atom.is_set) {
      set->insert(set->end(), atom.set.begin(), atom.set.end());
    } else {
      set->push_back({atom.code_point, atom.code_point});
    }
  }

  absl::StatusOr<Atom> ParseClassAtom() {
    if (Consume('\\')) return ParseEscape(/*in_class=*/true);
    if (Peek() == '[' && Peek(1) == ':') {
      size_t end = pos_ + 2;
      while (end < text_.size() && IsAsciiLetter(text_[end])) ++end;
      if (end + 1 < text_.size() && end > pos_ + 2 && text_[end] == ':' && text_[end + 1] == ']') {
        return Error(absl::StrCat("the POSIX class ", Text(pos_, end + 2), " is not supported"));
      }
    }
    Atom atom;
    atom.code_point = text_[pos_++];
    return atom;
  }

  // The escape after a '\' (already consumed).
  absl::StatusOr<Atom> ParseEscape(bool in_class) {
    const size_t backslash = pos_ - 1;
    if (AtEnd()) return ErrorAt("the pattern ends with a lone \\", backslash);
    const uint32_t c = text_[pos_++];
    Atom atom;
    auto set = [&atom](CodePointSet code_points) {
      atom.is_set = true;
      atom.set = std::move(code_points);
      return atom;
    };
    auto code_point = [&atom](uint32_t value) {
      atom.code_point = value;
      return atom;
    };
    const std::string escape = Text(backslash, pos_);
    switch (c) {
      case 'd':
        return set(regex_internal::DigitSet());
      case 'D':
        return set(regex_internal::ComplementSet(regex_internal::DigitSet()));
      case 'w':
        return set(regex_internal::WordSet());
      case 'W':
        return set(regex_internal::ComplementSet(regex_internal::WordSet()));
      case 's':
        return set(regex_internal::SpaceSet());
      case 'S':
        return set(regex_internal::ComplementSet(regex_internal::SpaceSet()));
      case 'n':
        return code_point('\n');
      case 't':
        return code_point('\t');
      case 'r':
        return code_point('\r');
      case 'f':
        return code_point('\f');
      case 'v':
        return code_point('\v');
      case 'b':
        if (in_class) return code_point('\b');
        return ErrorAt("the word boundary \\b is not supported", backslash);
      case 'B':
        return ErrorAt("the word boundary \\B is not supported", backslash);
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        return ErrorAt(absl::StrCat("the anchor ", escape, " is not supported"), backslash);
      case '0':
        if (!IsDigit(Peek())) return code_point(0);
        return ErrorAt("octal escapes are not supported", backslash);
      case 'c':
        if (!IsAsciiLetter(Peek())) return ErrorAt("\\c must be followed by a letter", backslash);
        return code_point(text_[pos_++] % 32);
      case 'x':
      case 'u': {
        absl::StatusOr<uint32_t> value = ParseHexEscape(c, backslash);
        if (!value.ok()) return value.status();
        return code_point(*value);
      }
      case 'p':
      case 'P':
        return ErrorAt(absl::StrCat("the Unicode property escape ", escape, "{...} is not supported"), backslash);
      case 'k':
        return ErrorAt("the backreference \\k<name> is not supported", backslash);
      default:
        break;
    }
    if (IsDigit(c)) {
      if (in_class) return ErrorAt("octal escapes are not supported", backslash);
      return ErrorAt(absl::StrCat("the backreference ", escape, " is not supported"), backslash);
    }
    // PCRE gives other escaped letters meanings of their own (\h, \R, \Q, ...): refuse rather than guess.
    if (IsAsciiLetter(c)) return ErrorAt(absl::StrCat("the escape ", escape, " is not supported"), backslash);
    return code_point(c);
  }

  // \xHH, \uHHHH (a surrogate pair of two makes one code point), \x{H...} and \u{H...}, after the letter.
  absl::StatusOr<uint32_t> ParseHexEscape(uint32_t letter, size_t backslash) {
    uint32_t value = 0;
    if (Consume('{')) {
      const size_t begin = pos_;
      while (HexValue(Peek()) >= 0 && value <= kMaxCodePoint) value = value * 16 + HexValue(text_[pos_++]);
      if (pos_ == begin || !Consume('}') || value > kMaxCodePoint) {
        return ErrorAt("malformed \\x{...} or \\u{...} escape", backslash);
      }
    } else {
      const size_t digits = letter == 'x' ? 2 : 4;
      for (size_t i = 0; i < digits; ++i) {
        if (HexValue(Peek()) < 0) {
          return ErrorAt(absl::StrCat("malformed \\", Text(backslash + 1, backslash + 2), " escape"), backslash);
        }
        value = value * 16 + HexValue(text_[pos_++]);
      }
      if (letter == 'u' && value >= 0xD800 && value <= 0xDBFF && Peek() == '\\' && Peek(1) == 'u') {
        uint32_t low = 0;
        bool valid = true;
        for (size_t i = 2; i < 6 && valid; ++i) {
          const int digit = HexValue(Peek(i));
          valid = digit >= 0;
          if (valid) low = low * 16 + digit;
        }
        if (valid && low >= 0xDC00 && low <= 0xDFFF) {
          pos_ += 6;
          value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
        }
      }
    }
    if (IsSurrogate(value)) {
      return ErrorAt("a lone surrogate escape cannot be matched (UTF-8 cannot carry it)", backslash);
    }
    return value;
  }

  std::vector<uint32_t> text_;
  size_t pos_ = 0;
  int depth_ = 0;
  CharEncoder encoder_;
};

}  // namespace

absl::StatusOr<Expr> CompileRegex(absl::string_view pattern, const RegexOptions& options) {
  absl::StatusOr<std::vector<uint32_t>> text = regex_internal::DecodeUtf8(pattern);
  if (!text.ok()) return text.status();
  RegexParser parser(*std::move(text), options);
  absl::StatusOr<std::vector<Branch>> branches = parser.ParsePattern();
  if (!branches.ok()) return branches.status();
  std::vector<Expr> alternatives;
  for (Branch& branch : *branches) {
    if (options.full_match) {
      alternatives.push_back(std::move(branch.expr));
      continue;
    }
    // Search semantics: unanchored ends take any content; one such run suffices around an empty pattern.
    const bool empty = branch.expr.kind == Expr::Kind::kEmpty;
    std::vector<Expr> parts;
    if (!branch.anchored_start) parts.push_back(parser.encoder().AnyContent());
    parts.push_back(std::move(branch.expr));
    if (!branch.anchored_end && !(empty && !branch.anchored_start)) parts.push_back(parser.encoder().AnyContent());
    alternatives.push_back(Expr::Sequence(std::move(parts)));
  }
  return Expr::Choice(std::move(alternatives));
}

}  // namespace llmc::grammar
