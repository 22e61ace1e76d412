#include "worker/jinja/lexer.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

enum class TagKind { kVariable, kBlock, kComment, kRaw };

// \r\n and \r become \n; one trailing newline goes unless kept (jinja2 does both before lexing).
std::string NormalizeNewlines(absl::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of the Python whitespace run starting at `position`.
size_t WhitespaceRun(absl::string_view text, size_t position) {
  size_t end = position;
  while (end < text.size()) {
    size_t next = end;
    if (!IsPythonSpace(DecodeCodePoint(text, &next))) break;
    end = next;
  }
  return end - position;
}

bool AllWhitespace(absl::string_view text) { return !text.empty() && WhitespaceRun(text, 0) == text.size(); }

absl::string_view RightStripWhitespace(absl::string_view text) {
  const std::vector<char32_t> code_points = DecodeAll(text);
  size_t keep = code_points.size();
  while (keep > 0 && IsPythonSpace(code_points[keep - 1])) --keep;
  size_t bytes = 0;
  for (size_t i = 0; i < keep; ++i) {
    std::string encoded;
    AppendCodePoint(code_points[i], &encoded);
    bytes += encoded.size();
  }
  return text.substr(0, bytes);
}

bool IsNameStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : source_(std::move(source)), options_(options) {
    for (size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') newlines_.push_back(i);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    size_t position = 0;
    bool line_starting = true;
    while (position < source_.size()) {
      const size_t open = FindTagStart(position);
      if (open == std::string::npos) {
        Emit(TokenType::kData, source_.substr(position), position);
        break;
      }
      TagKind kind = source_[open + 1] == '{'   ? TagKind::kVariable
                     : source_[open + 1] == '%' ? TagKind::kBlock
                                                : TagKind::kComment;
      size_t raw_body_start = 0;
      if (kind == TagKind::kBlock) raw_body_start = MatchRawBegin(open);
      if (raw_body_start != 0) kind = TagKind::kRaw;
      const char sign = open + 2 < source_.size() ? source_[open + 2] : '\0';
      absl::string_view text = absl::string_view(source_).substr(position, open - position);
      text = ApplyLeftStrip(text, sign, kind != TagKind::kVariable, line_starting);
      Emit(TokenType::kData, std::string(text), position);
      size_t after_sign = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::StatusOr<size_t> end;
      switch (kind) {
        case TagKind::kComment:
          end = SkipComment(after_sign);
          break;
        case TagKind::kRaw:
          end = ReadRaw(raw_body_start);
          break;
        case TagKind::kVariable:
        case TagKind::kBlock:
          end = ReadTag(kind, open, after_sign);
          break;
      }
      if (!end.ok()) return end.status();
      line_starting = *end > 0 && source_[*end - 1] == '\n';
      position = *end;
    }
    tokens_.push_back(Token{TokenType::kEnd, "", LineAt(source_.size())});
    return std::move(tokens_);
  }

 private:
  int LineAt(size_t position) const {
    return 1 + static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), position) - newlines_.begin());
  }

  absl::Status Error(absl::string_view message, size_t position) const {
    return absl::InvalidArgumentError(absl::StrCat(message, " at line ", LineAt(position)));
  }

  void Emit(TokenType type, std::string value, size_t position) {
    if (type == TokenType::kData && value.empty()) return;
    tokens_.push_back(Token{type, std::move(value), LineAt(position)});
  }

  size_t FindTagStart(size_t position) const {
    for (size_t i = source_.find('{', position); i != std::string::npos; i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // The data before a tag loses its trailing whitespace for `-`, and with lstrip_blocks the spaces between
  // the line start and a block or comment tag (unless the tag says `+`).
  absl::string_view ApplyLeftStrip(absl::string_view text, char sign, bool is_block_like, bool line_starting) const {
    if (sign == '-') return RightStripWhitespace(text);
    if (sign == '+' || !options_.lstrip_blocks || !is_block_like) return text;
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == absl::string_view::npos ? 0 : newline + 1;
    if ((line_start > 0 || line_starting) && AllWhitespace(text.substr(line_start))) return text.substr(0, line_start);
    return text;
  }

  // After a block or comment end: `-` eats all following whitespace; otherwise trim_blocks eats one newline
  // unless the end was written `+%}`.
  size_t AfterTagEnd(size_t end_start, size_t end_length, bool minus, bool plus, bool block_like) const {
    size_t end = end_start + end_length;
    if (minus) return end + WhitespaceRun(source_, end);
    if (!plus && block_like && options_.trim_blocks && end < source_.size() && source_[end] == '\n') ++end;
    return end;
  }

  // `{% raw %}` (with optional -/+ and spaces): the position after its end, or 0 when this is not one.
  size_t MatchRawBegin(size_t open) const {
    size_t i = open + 2;
    if (i < source_.size() && (source_[i] == '-' || source_[i] == '+')) ++i;
    i += WhitespaceRun(source_, i);
    if (source_.compare(i, 3, "raw") != 0) return 0;
    i += 3;
    i += WhitespaceRun(source_, i);
    if (source_.compare(i, 3, "-%}") == 0) return AfterTagEnd(i, 3, true, false, false);
    if (source_.compare(i, 2, "%}") == 0) return i + 2;
    return 0;
  }

  absl::StatusOr<size_t> SkipComment(size_t position) {
    for (size_t i = position; i < source_.size(); ++i) {
      if (source_.compare(i, 3, "+#}") == 0) return AfterTagEnd(i, 3, false, true, true);
      if (source_.compare(i, 3, "-#}") == 0) return AfterTagEnd(i, 3, true, false, true);
      if (source_.compare(i, 2, "#}") == 0) return AfterTagEnd(i, 2, false, false, true);
    }
    return Error("Missing end of comment tag", position);
  }

  absl::StatusOr<size_t> ReadRaw(size_t body_start) {
    for (size_t i = source_.find("{%", body_start); i != std::string::npos; i = source_.find("{%", i + 1)) {
      size_t j = i + 2;
      const char sign = j < source_.size() ? source_[j] : '\0';
      if (sign == '-' || sign == '+') ++j;
      j += WhitespaceRun(source_, j);
      if (source_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      j += WhitespaceRun(source_, j);
      size_t end;
      if (source_.compare(j, 3, "+%}") == 0) {
        end = AfterTagEnd(j, 3, false, true, true);
      } else if (source_.compare(j, 3, "-%}") == 0) {
        end = AfterTagEnd(j, 3, true, false, true);
      } else if (source_.compare(j, 2, "%}") == 0) {
        end = AfterTagEnd(j, 2, false, false, true);
      } else {
        continue;
      }
      const bool line_starting = body_start > 0 && source_[body_start - 1] == '\n';
      absl::string_view body = absl::string_view(source_).substr(body_start, i - body_start);
      Emit(TokenType::kData, std::string(ApplyLeftStrip(body, sign, true, line_starting)), body_start);
      return end;
    }
    return Error("Missing end of raw directive", body_start);
  }

  // Tokens inside {{ }} or {% %}, up to and including the end delimiter; returns the position after it.
  absl::StatusOr<size_t> ReadTag(TagKind kind, size_t open, size_t position) {
    const bool is_block = kind == TagKind::kBlock;
    Emit(is_block ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", open);
    const char* end_text = is_block ? "%}" : "}}";
    std::vector<char> balance;
    while (true) {
      if (position >= source_.size()) {
        return Error(
            is_block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'",
            position);
      }
      if (balance.empty()) {
        size_t end_start = std::string::npos;
        bool minus = false;
        bool plus = false;
        if (is_block && source_.compare(position, 3, "+%}") == 0) {
          end_start = position;
          plus = true;
        } else if (source_[position] == '-' && source_.compare(position + 1, 2, end_text) == 0) {
          end_start = position;
          minus = true;
        } else if (source_.compare(position, 2, end_text) == 0) {
          end_start = position;
        }
        if (end_start != std::string::npos) {
          Emit(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", position);
          return AfterTagEnd(end_start, (minus || plus) ? 3 : 2, minus, plus, is_block);
        }
      }
      const size_t whitespace = WhitespaceRun(source_, position);
      if (whitespace > 0) {
        position += whitespace;
        continue;
      }
      absl::StatusOr<size_t> next = ReadExpressionToken(position, &balance);
      if (!next.ok()) return next.status();
      position = *next;
    }
  }

  absl::StatusOr<size_t> ReadExpressionToken(size_t position, std::vector<char>* balance) {
    const char c = source_[position];
    if (IsDigit(c)) return ReadNumber(position);
    if (IsNameStart(c)) {
      size_t end = position + 1;
      while (end < source_.size() && IsNameChar(source_[end])) ++end;
      Emit(TokenType::kName, source_.substr(position, end - position), position);
      return end;
    }
    if (c == '\'' || c == '"') return ReadString(position);
    static constexpr absl::string_view kTwoCharOperators[] = {"//", "**", "==", "!=", ">=", "<="};
    for (absl::string_view op : kTwoCharOperators) {
      if (source_.compare(position, 2, op.data(), 2) == 0) {
        Emit(TokenType::kOperator, std::string(op), position);
        return position + 2;
      }
    }
    static constexpr absl::string_view kOneCharOperators = "+-/*%~[](){}><=.:|,;";
    if (kOneCharOperators.find(c) == absl::string_view::npos) {
      std::string shown;
      size_t next = position;
      AppendCodePoint(DecodeCodePoint(source_, &next), &shown);
      return Error(absl::StrCat("unexpected char '", shown, "'"), position);
    }
    if (c == '(' || c == '[' || c == '{') {
      balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) return Error(absl::StrCat("unexpected '", std::string(1, c), "'"), position);
      if (balance->back() != c) {
        return Error(
            absl::StrCat("unexpected '", std::string(1, c), "', expected '", std::string(1, balance->back()), "'"),
            position);
      }
      balance->pop_back();
    }
    Emit(TokenType::kOperator, std::string(1, c), position);
    return position + 1;
  }

  // Digits with optional single underscores between them; returns the end, or `position` when none.
  size_t DigitRun(size_t position) const {
    size_t end = position;
    while (end < source_.size() && IsDigit(source_[end])) {
      ++end;
      if (end + 1 < source_.size() && source_[end] == '_' && IsDigit(source_[end + 1])) ++end;
    }
    return end;
  }

  absl::StatusOr<size_t> ReadNumber(size_t position) {
    const size_t integer_end = DigitRun(position);
    size_t end = integer_end;
    bool is_float = false;
    const bool after_dot = position > 0 && source_[position - 1] == '.';
    if (!after_dot) {
      if (end + 1 < source_.size() && source_[end] == '.' && IsDigit(source_[end + 1])) {
        end = DigitRun(end + 1);
        is_float = true;
      }
      if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
        size_t exponent = end + 1;
        if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-')) ++exponent;
        if (exponent < source_.size() && IsDigit(source_[exponent])) {
          end = DigitRun(exponent);
          is_float = true;
        }
      }
    }
    std::string text;
    for (size_t i = position; i < end; ++i) {
      if (source_[i] != '_') text.push_back(source_[i]);
    }
    if (is_float) {
      Emit(TokenType::kFloat, text, position);
      return end;
    }
    // 0x.., 0o.., 0b.. and a lone zero; other integers may not start with 0.
    if (source_[position] == '0') {
      const char base =
          integer_end < source_.size() ? static_cast<char>(absl::ascii_tolower(source_[integer_end])) : '\0';
      if (integer_end == position + 1 && (base == 'x' || base == 'o' || base == 'b')) {
        size_t digits_end = integer_end + 1;
        std::string digits;
        while (digits_end < source_.size() &&
               (absl::ascii_isxdigit(static_cast<unsigned char>(source_[digits_end])) || source_[digits_end] == '_')) {
          if (source_[digits_end] != '_') digits.push_back(source_[digits_end]);
          ++digits_end;
        }
        const int radix = base == 'x' ? 16 : base == 'o' ? 8 : 2;
        uint64_t value = 0;
        for (char d : digits) {
          const int digit = IsDigit(d) ? d - '0' : absl::ascii_tolower(static_cast<unsigned char>(d)) - 'a' + 10;
          if (digit >= radix) return Error("invalid integer literal", position);
          if (value > (uint64_t{1} << 62) / static_cast<uint64_t>(radix))
            return Error("integer literal too large", position);
          value = value * static_cast<uint64_t>(radix) + static_cast<uint64_t>(digit);
        }
        if (digits.empty()) return Error("invalid integer literal", position);
        Emit(TokenType::kInteger, std::to_string(value), position);
        return digits_end;
      }
      if (text.find_first_not_of('0') != std::string::npos) {
        // "012" lexes as 0 followed by 12 in jinja2, which then fails to parse; refuse it here.
        return Error("invalid integer literal", position);
      }
      text = "0";
    }
    Emit(TokenType::kInteger, text, position);
    return end;
  }

  absl::StatusOr<size_t> ReadString(size_t position) {
    const char quote = source_[position];
    std::string raw;
    size_t i = position + 1;
    for (; i < source_.size() && source_[i] != quote; ++i) {
      if (source_[i] == '\\' && i + 1 < source_.size()) {
        raw.push_back(source_[i]);
        ++i;
      }
      raw.push_back(source_[i]);
    }
    if (i >= source_.size()) {
      size_t next = position;
      std::string shown;
      AppendCodePoint(DecodeCodePoint(source_, &next), &shown);
      return Error(absl::StrCat("unexpected char '", shown, "'"), position);
    }
    absl::StatusOr<std::string> value = Unescape(raw, position);
    if (!value.ok()) return value.status();
    Emit(TokenType::kString, *std::move(value), position);
    return i + 1;
  }

  // Python's unicode-escape decoding, which jinja2 applies to string literals.
  absl::StatusOr<std::string> Unescape(absl::string_view raw, size_t position) const {
    std::string out;
    out.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out.push_back(raw[i]);
        continue;
      }
      const char e = raw[++i];
      switch (e) {
        case '\n':
          break;
        case '\\':
        case '\'':
        case '"':
          out.push_back(e);
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t code_point = 0;
          for (size_t k = 1; k <= digits; ++k) {
            if (i + k >= raw.size() || !absl::ascii_isxdigit(static_cast<unsigned char>(raw[i + k]))) {
              return Error("truncated escape in string literal", position);
            }
            const char d = static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(raw[i + k])));
            code_point = code_point * 16 + static_cast<uint32_t>(IsDigit(d) ? d - '0' : d - 'a' + 10);
          }
          if (code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
            return Error("escape in string literal is not a character", position);
          }
          AppendCodePoint(code_point, &out);
          i += digits;
          break;
        }
        case 'N':
          return Error("\\N{...} escapes are not supported", position);
        default:
          if (e >= '0' && e <= '7') {
            uint32_t code_point = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++k) {
              code_point = code_point * 8 + static_cast<uint32_t>(raw[++i] - '0');
            }
            AppendCodePoint(code_point, &out);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  std::string source_;
  LexerOptions options_;
  std::vector<size_t> newlines_;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source, const LexerOptions& options) {
  if (!IsValidUtf8(source)) return absl::InvalidArgumentError("template is not valid UTF-8");
  return Lexer(NormalizeNewlines(source, options.keep_trailing_newline), options).Run();
}

}  // namespace llmc::jinja
