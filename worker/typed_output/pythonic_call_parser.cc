// Pythonic tool calls (Llama 3.2 / Llama 4 templates): the whole output is a Python list of calls with keyword
// arguments, [f(a=1, b="x"), g()], optionally between <|python_start|> and <|python_end|>. Argument values are
// Python literals (strings, numbers, True/False/None, lists, tuples, dicts; JSON's true/false/null too), converted
// to JSON.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker/typed_output/call_parsing.h"

namespace llmc::typed_output::internal {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kPythonStart = "<|python_start|>";
constexpr std::string_view kPythonEnd = "<|python_end|>";
constexpr int kMaxDepth = 128;

bool IsIdentifierStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdentifierChar(char c) { return IsIdentifierStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t code, std::string& out) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// A recursive-descent reader of the call list; every method returns false on text it does not accept.
class PythonReader {
 public:
  explicit PythonReader(std::string_view text) : text_(text) {}

  std::optional<std::vector<ParsedCall>> ReadCallList() {
    std::vector<ParsedCall> calls;
    if (!Consume('[')) return std::nullopt;
    while (true) {
      SkipSpace();
      if (Consume(']')) break;
      ParsedCall call;
      if (!ReadCall(call)) return std::nullopt;
      calls.push_back(std::move(call));
      SkipSpace();
      if (Consume(']')) break;
      if (!Consume(',')) return std::nullopt;
    }
    SkipSpace();
    if (pos_ != text_.size()) return std::nullopt;
    return calls;
  }

 private:
  void SkipSpace() { pos_ += LeadingSpace(text_.substr(pos_)); }
  bool Peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }

  std::string_view ReadIdentifier() {
    const size_t start = pos_;
    if (pos_ < text_.size() && IsIdentifierStart(text_[pos_])) {
      while (pos_ < text_.size() && IsIdentifierChar(text_[pos_])) ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  bool ReadCall(ParsedCall& call) {
    // A dotted name (module.function) is allowed.
    std::string name(ReadIdentifier());
    if (name.empty()) return false;
    while (Peek('.')) {
      ++pos_;
      const std::string_view part = ReadIdentifier();
      if (part.empty()) return false;
      name += '.';
      name += part;
    }
    SkipSpace();
    if (!Consume('(')) return false;
    Json arguments = Json::object();
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      const std::string key(ReadIdentifier());
      if (key.empty()) return false;  // positional arguments have no JSON name
      SkipSpace();
      if (!Consume('=')) return false;
      SkipSpace();
      Json value;
      if (!ReadValue(value, 0)) return false;
      arguments[key] = std::move(value);
      SkipSpace();
      if (Consume(')')) break;
      if (!Consume(',')) return false;
    }
    call.name = std::move(name);
    call.arguments = CompactJson(arguments);
    return true;
  }

  bool ReadValue(Json& value, int depth) {
    if (depth > kMaxDepth || pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '"' || c == '\'') {
      std::string text;
      if (!ReadString(text)) return false;
      value = std::move(text);
      return true;
    }
    if (c == '[' || c == '(') return ReadSequence(c == '[' ? ']' : ')', value, depth);
    if (c == '{') return ReadDict(value, depth);
    if (IsDigit(c) || c == '-' || c == '+' || c == '.') return ReadNumber(value);
    const std::string_view word = ReadIdentifier();
    if (word == "True" || word == "true") {
      value = true;
    } else if (word == "False" || word == "false") {
      value = false;
    } else if (word == "None" || word == "null") {
      value = nullptr;
    } else {
      return false;
    }
    return true;
  }

  bool ReadSequence(char close, Json& value, int depth) {
    ++pos_;
    value = Json::array();
    while (true) {
      SkipSpace();
      if (Consume(close)) return true;
      Json element;
      if (!ReadValue(element, depth + 1)) return false;
      value.push_back(std::move(element));
      SkipSpace();
      if (Consume(close)) return true;
      if (!Consume(',')) return false;
    }
  }

  bool ReadDict(Json& value, int depth) {
    ++pos_;
    value = Json::object();
    while (true) {
      SkipSpace();
      if (Consume('}')) return true;
      Json key;
      if (!ReadValue(key, depth + 1)) return false;
      std::string name;
      if (key.is_string()) {
        name = key.get<std::string>();
      } else if (key.is_number() || key.is_boolean() || key.is_null()) {
        name = CompactJson(key);  // JSON object keys are strings
      } else {
        return false;
      }
      SkipSpace();
      if (!Consume(':')) return false;
      SkipSpace();
      Json element;
      if (!ReadValue(element, depth + 1)) return false;
      value[name] = std::move(element);
      SkipSpace();
      if (Consume('}')) return true;
      if (!Consume(',')) return false;
    }
  }

  bool ReadNumber(Json& value) {
    std::string number;
    if (Peek('-') || Peek('+')) {
      if (text_[pos_] == '-') number += '-';
      ++pos_;
    }
    const size_t digits_start = pos_;
    while (pos_ < text_.size() && IsDigit(text_[pos_])) number += text_[pos_++];
    bool any_digit = pos_ > digits_start;
    bool integer = true;
    if (Peek('.')) {
      integer = false;
      ++pos_;
      if (!any_digit) number += '0';  // .5
      number += '.';
      const size_t fraction_start = pos_;
      while (pos_ < text_.size() && IsDigit(text_[pos_])) number += text_[pos_++];
      if (pos_ == fraction_start) number += '0';  // 5.
      any_digit = any_digit || pos_ > fraction_start;
    }
    if (!any_digit) return false;
    if (Peek('e') || Peek('E')) {
      integer = false;
      number += text_[pos_++];
      if (Peek('-') || Peek('+')) number += text_[pos_++];
      const size_t exponent_start = pos_;
      while (pos_ < text_.size() && IsDigit(text_[pos_])) number += text_[pos_++];
      if (pos_ == exponent_start) return false;
    }
    if (pos_ < text_.size() && IsIdentifierChar(text_[pos_])) return false;
    // Python allows leading zeros only in 0 itself; JSON's parser says the same of our normalised text.
    if (integer) {
      const std::string_view digits = std::string_view(number).substr(number[0] == '-' ? 1 : 0);
      if (digits.size() > 1 && digits[0] == '0') return false;
    }
    value = Json::parse(number, nullptr, /*allow_exceptions=*/false);
    return !value.is_discarded();
  }

  bool ReadString(std::string& out) {
    const char quote = text_[pos_];
    const bool triple = text_.substr(pos_, 3) == std::string(3, quote);
    pos_ += triple ? 3 : 1;
    while (true) {
      if (pos_ >= text_.size()) return false;
      const char c = text_[pos_];
      if (c == quote) {
        if (!triple) {
          ++pos_;
          return true;
        }
        if (text_.substr(pos_, 3) == std::string(3, quote)) {
          pos_ += 3;
          return true;
        }
      }
      if (c == '\n' && !triple) return false;
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (++pos_ >= text_.size()) return false;
      const char escaped = text_[pos_++];
      switch (escaped) {
        case '\n':
          break;  // a line continuation
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case 'a':
          out += '\a';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
        case '\'':
        case '"':
          out += escaped;
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t length = escaped == 'x' ? 2 : escaped == 'u' ? 4 : 8;
          uint32_t code = 0;
          for (size_t i = 0; i < length; ++i) {
            const int digit = pos_ < text_.size() ? HexValue(text_[pos_]) : -1;
            if (digit < 0) return false;
            code = code * 16 + static_cast<uint32_t>(digit);
            ++pos_;
          }
          if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
          AppendUtf8(code, out);
          break;
        }
        default:  // Python keeps unknown escapes as written
          out += '\\';
          out += escaped;
          break;
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

class PythonicParser : public WholeTextCallParser {
 public:
  explicit PythonicParser(ToolCallParserOptions options)
      : WholeTextCallParser({"[", std::string(kPythonStart)}, CallIdStyle::kOpenAi, std::move(options)) {}

 protected:
  std::optional<std::vector<ParsedCall>> ParseWhole(std::string_view text) const override {
    text = TrimSpace(text);
    if (StartsWith(text, kPythonStart)) {
      text.remove_prefix(kPythonStart.size());
      if (text.size() >= kPythonEnd.size() && text.substr(text.size() - kPythonEnd.size()) == kPythonEnd) {
        text.remove_suffix(kPythonEnd.size());
      }
      text = TrimSpace(text);
    }
    return PythonReader(text).ReadCallList();
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> MakePythonicParser(ToolCallParserOptions options) {
  return std::make_unique<PythonicParser>(std::move(options));
}

}  // namespace llmc::typed_output::internal
