// Strings: JSON string characters, minLength/maxLength, pattern, format, and object keys that exclude a set
// of listed keys.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/grammar/json_schema_internal.h"
#include "worker/grammar/regex_compiler.h"

namespace llmc::grammar::json_schema {
namespace {

// Length bounds up to this are spelled out character by character (a few states each, and every position
// of a string keeps its own token-mask table, shared across schemas); longer ones count in chunks.
constexpr uint32_t kInlineRepeat = 1024;
constexpr uint32_t kChunk = 16;

// Raw characters a JSON string may hold unescaped.
std::vector<CodePointRange> SpecialCharacters() { return {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}; }

Expr RawStringChar() { return Expr::NegatedCharClass(SpecialCharacters()); }

// What follows the backslash of an escape nlohmann::json writes.
Expr CanonicalEscapeTail() {
  const Expr low = Alt({Seq({Lit("0"), Alt({Range('0', '7'), Chars("bef")})}),
                        Seq({Lit("1"), Expr::CharClass({{'0', '9'}, {'a', 'f'}})})});
  return Alt({Chars("\"\\bfnrt"), Seq({Lit("u00"), low})});
}

// The escapes CanonicalStringChar allows, each as its full text.
std::vector<std::string> CanonicalEscapes() {
  std::vector<std::string> escapes = {"\\\"", "\\\\", "\\b", "\\f", "\\n", "\\r", "\\t"};
  static const char kHex[] = "0123456789abcdef";
  for (int c = 0; c < 0x20; ++c) {
    if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') continue;
    escapes.push_back(absl::StrCat("\\u00", std::string(1, kHex[c >> 4]), std::string(1, kHex[c & 15])));
  }
  return escapes;
}

// Splits an encoded string (JSON string content) into its characters: one code point's UTF-8 bytes or one
// escape sequence each.
std::vector<std::string> SplitUnits(const std::string& encoded) {
  std::vector<std::string> units;
  for (size_t i = 0; i < encoded.size();) {
    size_t length = 1;
    const auto byte = static_cast<unsigned char>(encoded[i]);
    if (encoded[i] == '\\') {
      length = i + 1 < encoded.size() && encoded[i + 1] == 'u' ? 6 : 2;
    } else if (byte >= 0xF0) {
      length = 4;
    } else if (byte >= 0xE0) {
      length = 3;
    } else if (byte >= 0xC0) {
      length = 2;
    }
    units.push_back(encoded.substr(i, length));
    i += length;
  }
  return units;
}

uint32_t DecodeCodePoint(const std::string& unit) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(unit[i])); };
  if (unit.size() == 1) return byte(0);
  if (unit.size() == 2) return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
  if (unit.size() == 3) return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
}

struct TrieNode {
  bool key_end = false;
  std::map<std::string, std::unique_ptr<TrieNode>> children;  // by character (encoded unit)
};

// The rest of a key from `node` on, through the closing quote, that is not one of the keys. `tail` is any rest of
// a string with its closing quote. As deep as the longest key (CompileObject bounds them).
Expr TrieExpr(const TrieNode& node, const std::vector<std::string>& escapes, const Expr& tail) {
  std::vector<Expr> choices;
  if (!node.key_end) choices.push_back(Lit("\""));
  // A character no key continues with here: then anything.
  std::vector<CodePointRange> taken = SpecialCharacters();
  std::vector<Expr> others;
  for (const auto& [unit, child] : node.children) {
    if (unit[0] != '\\') taken.push_back({DecodeCodePoint(unit), DecodeCodePoint(unit)});
  }
  others.push_back(Expr::NegatedCharClass(taken));
  bool escaped_child = false;
  for (const auto& [unit, child] : node.children) escaped_child |= unit[0] == '\\';
  if (!escaped_child) {
    others.push_back(Seq({Lit("\\"), CanonicalEscapeTail()}));
  } else {
    for (const std::string& escape : escapes) {
      if (node.children.count(escape) == 0) others.push_back(Lit(escape));
    }
  }
  choices.push_back(Seq({Alt(std::move(others)), tail}));
  for (const auto& [unit, child] : node.children) choices.push_back(Seq({Lit(unit), TrieExpr(*child, escapes, tail)}));
  return Alt(std::move(choices));
}

LengthBounds Add(LengthBounds a, LengthBounds b) {
  const auto sum = [](uint32_t x, uint32_t y) {
    return x == kUnbounded || y == kUnbounded || uint64_t{x} + y >= kUnbounded ? kUnbounded : x + y;
  };
  return {sum(a.min, b.min), sum(a.max, b.max)};
}

uint32_t Times(uint32_t x, uint32_t count) {
  if (x == 0 || count == 0) return 0;
  if (x == kUnbounded || count == kUnbounded || uint64_t{x} * count >= kUnbounded) return kUnbounded;
  return x * count;
}

// The JSON string content of `count` characters of class `ranges` (code points): raw where JSON allows, the
// escapes nlohmann::json writes otherwise.
Expr EscapedClass(const std::vector<CodePointRange>& ranges) {
  std::vector<Expr> choices;
  std::vector<CodePointRange> raw;
  for (const CodePointRange& range : ranges) {
    for (const CodePointRange& special : SpecialCharacters()) {
      for (uint32_t c = std::max(range.first, special.first); c <= std::min(range.last, special.last); ++c) {
        const std::string text = nlohmann::json(std::string(1, static_cast<char>(c))).dump();
        choices.push_back(Lit(text.substr(1, text.size() - 2)));
      }
    }
    raw.push_back(range);
  }
  Expr raw_class = Expr::CharClass(raw);
  std::vector<CodePointRange> allowed;
  for (const CodePointRange& range : RawStringChar().ranges) {
    for (const CodePointRange& r : raw_class.ranges) {
      const uint32_t first = std::max(range.first, r.first);
      const uint32_t last = std::min(range.last, r.last);
      if (first <= last) allowed.push_back({first, last});
    }
  }
  choices.push_back(Expr::CharClass(std::move(allowed)));
  return Alt(std::move(choices));
}

// Length bounds beside pattern or format: implied by the content's own lengths, or intersected with a
// repetition of one class, or refused.
absl::StatusOr<Expr> WithLength(Expr content, const Expr& unescaped, uint32_t min, uint32_t max,
                                absl::string_view pointer, absl::string_view content_keyword) {
  const LengthBounds bounds = ExprLengthBounds(unescaped);
  if (bounds.min >= min && bounds.max <= max) return content;
  if (bounds.min > max || bounds.max < min) return Expr::Nothing();
  if (unescaped.kind == Expr::Kind::kRepeat && unescaped.children[0].kind == Expr::Kind::kCharClass) {
    const uint32_t low = std::max(min, unescaped.min);
    const uint32_t high = std::min(max, unescaped.max);
    if (low > high) return Expr::Nothing();
    return Expr::Repeat(EscapedClass(unescaped.children[0].ranges), low, high);
  }
  if (unescaped.kind == Expr::Kind::kCharClass) return min <= 1 && max >= 1 ? content : Expr::Nothing();
  return Unsupported(min > bounds.min ? "minLength" : "maxLength", pointer,
                     absl::StrCat("cannot be combined with this ", content_keyword));
}

}  // namespace

// One character of a generated string: raw UTF-8, or the one canonical escape of a character JSON must escape
// (\" \\ \b \f \n \r \t, \u00XX for other controls). Every JSON string can be written so, and a model has
// no other escapes to wander through; the automaton needs a few states per character, not dozens.
Expr JsonStringChar() { return CanonicalStringChar(); }

Expr CanonicalStringChar() { return Alt({RawStringChar(), Seq({Lit("\\"), CanonicalEscapeTail()})}); }

size_t CodePointCount(absl::string_view utf8) {
  size_t count = 0;
  for (const char c : utf8) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

LengthBounds ExprLengthBounds(const Expr& expr) {
  switch (expr.kind) {
    case Expr::Kind::kEmpty:
      return {0, 0};
    case Expr::Kind::kLiteral: {
      const auto length = static_cast<uint32_t>(CodePointCount(expr.literal));
      return {length, length};
    }
    case Expr::Kind::kCharClass:
      return {1, 1};
    case Expr::Kind::kRuleRef:
      return {0, kUnbounded};
    case Expr::Kind::kSequence: {
      LengthBounds total{0, 0};
      for (const Expr& child : expr.children) total = Add(total, ExprLengthBounds(child));
      return total;
    }
    case Expr::Kind::kChoice: {
      LengthBounds total{kUnbounded, 0};
      for (const Expr& child : expr.children) {
        const LengthBounds bounds = ExprLengthBounds(child);
        total.min = std::min(total.min, bounds.min);
        total.max = std::max(total.max, bounds.max);
      }
      return total;
    }
    case Expr::Kind::kRepeat: {
      const LengthBounds child = ExprLengthBounds(expr.children[0]);
      return {Times(child.min, expr.min), Times(child.max, expr.max)};
    }
  }
  return {0, kUnbounded};
}

Expr SchemaCompiler::KeyExcluding(const std::vector<std::string>& excluded) {
  if (excluded.empty()) return Seq({Lit("\""), Expr::Star(CanonicalStringChar()), Lit("\"")});
  TrieNode root;
  for (const std::string& key : excluded) {
    const std::string encoded = nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    TrieNode* node = &root;
    for (const std::string& unit : SplitUnits(encoded.substr(1, encoded.size() - 2))) {
      std::unique_ptr<TrieNode>& child = node->children[unit];
      if (!child) child = std::make_unique<TrieNode>();
      node = child.get();
    }
    node->key_end = true;
  }
  const Expr tail = Seq({Expr::Star(CanonicalStringChar()), Lit("\"")});
  return Seq({Lit("\""), TrieExpr(root, CanonicalEscapes(), tail)});
}

absl::StatusOr<Expr> SchemaCompiler::CompileString(const Json& schema, const std::string& pointer) {
  ASSIGN_OR_RETURN(const CountBounds length, ReadCountBounds(schema, "minLength", "maxLength", pointer));
  const uint32_t min = length.min;
  const uint32_t max = length.max;
  if (min > max) return Expr::Nothing();
  const bool has_pattern = schema.contains("pattern");
  const bool has_format = schema.contains("format");
  if (has_pattern && has_format) return Unsupported("format", pointer, "together with pattern");
  if (has_format) {
    const Json& format = schema.at("format");
    if (!format.is_string()) return InvalidValue("format", pointer, "not a string");
    absl::StatusOr<Expr> content = FormatContent(format.get<std::string>());
    if (!content.ok()) {
      return Unsupported("format", pointer, absl::StrCat("unknown format '", format.get<std::string>(), "'"));
    }
    ASSIGN_OR_RETURN(Expr bounded, WithLength(*content, *content, min, max, pointer, "format"));
    return Intern(absl::StrCat("format-", format.get<std::string>()), Seq({Lit("\""), std::move(bounded), Lit("\"")}));
  }
  if (has_pattern) {
    const Json& pattern = schema.at("pattern");
    if (!pattern.is_string()) return InvalidValue("pattern", pointer, "not a string");
    RegexOptions options;
    options.full_match = false;
    options.json_string_content = true;
    absl::StatusOr<Expr> content = CompileRegex(pattern.get<std::string>(), options);
    if (!content.ok()) return Unsupported("pattern", pointer, content.status().message());
    Expr bounded = *std::move(content);
    if (min > 0 || max != kUnbounded) {
      options.json_string_content = false;
      ASSIGN_OR_RETURN(Expr unescaped, CompileRegex(pattern.get<std::string>(), options));
      ASSIGN_OR_RETURN(bounded, WithLength(std::move(bounded), unescaped, min, max, pointer, "pattern"));
    }
    return Intern("pattern", Seq({Lit("\""), std::move(bounded), Lit("\"")}));
  }
  if (min == 0 && max == kUnbounded) return AnyString();
  return Seq({Lit("\""), RepeatCharacters(min, max), Lit("\"")});
}

Expr SchemaCompiler::RepeatCharacters(uint32_t min, uint32_t max) {
  const Expr character = JsonStringChar();
  if (min <= kInlineRepeat && (max == kUnbounded || max <= kInlineRepeat)) return Expr::Repeat(character, min, max);
  // Long bounds count in chunks: a rule of kChunk characters (too big for the automaton to copy into its
  // callers, so its states exist once) repeated, then up to kChunk - 1 single characters. A length L is
  // kChunk * q + r; the first and last q take only the r that keep L within bounds.
  const Expr chunk = Intern("chars-16", Expr::Repeat(character, kChunk, kChunk));
  const auto chunks = [&](uint32_t first, uint32_t last) { return Expr::Repeat(chunk, first, last); };
  const uint32_t q_min = min / kChunk;
  if (max == kUnbounded) {
    return Seq({chunks(q_min, q_min), Expr::Repeat(character, min - q_min * kChunk, kUnbounded)});
  }
  const uint32_t q_max = max / kChunk;
  if (q_min == q_max) {
    return Seq({chunks(q_min, q_min), Expr::Repeat(character, min - q_min * kChunk, max - q_max * kChunk)});
  }
  std::vector<Expr> choices;
  choices.push_back(Seq({chunks(q_min, q_min), Expr::Repeat(character, min - q_min * kChunk, kChunk - 1)}));
  if (q_min + 1 < q_max) choices.push_back(Seq({chunks(q_min + 1, q_max - 1), Expr::Repeat(character, 0, kChunk - 1)}));
  choices.push_back(Seq({chunks(q_max, q_max), Expr::Repeat(character, 0, max - q_max * kChunk)}));
  return Alt(std::move(choices));
}

}  // namespace llmc::grammar::json_schema
