#include "worker/jinja/methods.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/operators.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

constexpr absl::string_view kStringMethods[] = {
    "strip", "lstrip", "rstrip",  "split",      "rsplit",    "splitlines", "startswith",   "endswith",    "replace",
    "upper", "lower",  "title",   "capitalize", "swapcase",  "find",       "rfind",        "index",       "rindex",
    "count", "join",   "isdigit", "isalpha",    "isalnum",   "isspace",    "isupper",      "islower",     "center",
    "ljust", "rjust",  "zfill",   "format",     "partition", "rpartition", "removeprefix", "removesuffix"};
// The str methods markupsafe's Markup overrides: their string arguments are escaped and their strings come
// back as Markup (split and partition return lists and tuples of Markup).
constexpr absl::string_view kMarkupMethods[] = {
    "capitalize", "title",      "lower",     "upper",      "replace", "ljust",        "rjust",        "lstrip",
    "rstrip",     "center",     "strip",     "swapcase",   "zfill",   "removeprefix", "removesuffix", "split",
    "rsplit",     "splitlines", "partition", "rpartition", "format",  "join"};
constexpr absl::string_view kDictMethods[] = {"items", "keys", "values", "get", "copy"};
constexpr absl::string_view kListMethods[] = {"index", "count", "copy"};
constexpr absl::string_view kUnsafeDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr absl::string_view kUnsafeListMethods[] = {"append", "extend",  "insert", "pop",
                                                    "remove", "reverse", "sort",   "clear"};

template <size_t N>
bool Contains(const absl::string_view (&names)[N], absl::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

absl::Status ArgumentError(absl::string_view method, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(method, "() ", message));
}

absl::StatusOr<const std::string*> OptionalString(const CallArguments& arguments, size_t index, absl::string_view name,
                                                  absl::string_view method) {
  const Value* value = arguments.Get(index, name);
  if (value == nullptr || value->is_none()) return nullptr;
  if (!value->is_string())
    return ArgumentError(method, absl::StrCat("argument must be str or None, not ", TypeName(*value)));
  return &value->string_value();
}

absl::StatusOr<const std::string*> RequiredString(const CallArguments& arguments, size_t index, absl::string_view name,
                                                  absl::string_view method) {
  const Value* value = arguments.Get(index, name);
  if (value == nullptr) return ArgumentError(method, "missing a required argument");
  if (!value->is_string()) return ArgumentError(method, absl::StrCat("argument must be str, not ", TypeName(*value)));
  return &value->string_value();
}

absl::StatusOr<int64_t> OptionalInt(const CallArguments& arguments, size_t index, absl::string_view name,
                                    int64_t fallback, absl::string_view method) {
  const Value* value = arguments.Get(index, name);
  if (value == nullptr || value->is_none()) return fallback;
  if (!value->is_int() && !value->is_bool()) {
    return ArgumentError(method, absl::StrCat("'", TypeName(*value), "' object cannot be interpreted as an integer"));
  }
  return value->AsInt();
}

std::vector<Value> SplitOnWhitespace(absl::string_view text, int64_t max_split, bool from_right) {
  const std::vector<char32_t> characters = DecodeAll(text);
  std::vector<std::vector<char32_t>> pieces;
  if (!from_right) {
    size_t i = 0;
    while (i < characters.size()) {
      while (i < characters.size() && IsPythonSpace(characters[i])) ++i;
      if (i >= characters.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(pieces.size()) == max_split) {
        size_t end = characters.size();
        while (end > i && IsPythonSpace(characters[end - 1])) --end;
        pieces.emplace_back(characters.begin() + static_cast<ptrdiff_t>(i),
                            characters.begin() + static_cast<ptrdiff_t>(end));
        break;
      }
      size_t start = i;
      while (i < characters.size() && !IsPythonSpace(characters[i])) ++i;
      pieces.emplace_back(characters.begin() + static_cast<ptrdiff_t>(start),
                          characters.begin() + static_cast<ptrdiff_t>(i));
    }
  } else {
    size_t i = characters.size();
    while (i > 0) {
      while (i > 0 && IsPythonSpace(characters[i - 1])) --i;
      if (i == 0) break;
      if (max_split >= 0 && static_cast<int64_t>(pieces.size()) == max_split) {
        size_t start = 0;
        while (start < i && IsPythonSpace(characters[start])) ++start;
        pieces.emplace_back(characters.begin() + static_cast<ptrdiff_t>(start),
                            characters.begin() + static_cast<ptrdiff_t>(i));
        break;
      }
      size_t end = i;
      while (i > 0 && !IsPythonSpace(characters[i - 1])) --i;
      pieces.emplace_back(characters.begin() + static_cast<ptrdiff_t>(i),
                          characters.begin() + static_cast<ptrdiff_t>(end));
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  std::vector<Value> result;
  for (const auto& piece : pieces) result.push_back(Value::String(EncodeAll(piece)));
  return result;
}

std::vector<Value> SplitOnSeparator(const std::string& text, const std::string& separator, int64_t max_split,
                                    bool from_right) {
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      if (max_split >= 0 && static_cast<int64_t>(pieces.size()) == max_split) break;
      const size_t found = text.find(separator, start);
      if (found == std::string::npos) break;
      pieces.push_back(text.substr(start, found - start));
      start = found + separator.size();
    }
    pieces.push_back(text.substr(start));
  } else {
    size_t end = text.size();
    while (true) {
      if (max_split >= 0 && static_cast<int64_t>(pieces.size()) == max_split) break;
      if (end < separator.size()) break;
      const size_t found = text.rfind(separator, end - separator.size());
      if (found == std::string::npos) break;
      pieces.push_back(text.substr(found + separator.size(), end - found - separator.size()));
      end = found;
    }
    pieces.push_back(text.substr(0, end));
    std::reverse(pieces.begin(), pieces.end());
  }
  std::vector<Value> result;
  for (auto& piece : pieces) result.push_back(Value::String(std::move(piece)));
  return result;
}

std::string TitleCase(absl::string_view text) {
  std::string out;
  bool previous_cased = false;
  size_t position = 0;
  while (position < text.size()) {
    const char32_t c = DecodeCodePoint(text, &position);
    AppendCodePoint(previous_cased ? ToLowerCase(c) : ToUpperCase(c), &out);
    previous_cased = IsCased(c);
  }
  return out;
}

std::string Capitalize(absl::string_view text) {
  std::string out;
  size_t position = 0;
  bool first = true;
  while (position < text.size()) {
    const char32_t c = DecodeCodePoint(text, &position);
    AppendCodePoint(first ? ToUpperCase(c) : ToLowerCase(c), &out);
    first = false;
  }
  return out;
}

// Code point index of a byte offset (Python's str.find answers in code points).
int64_t CharacterIndex(absl::string_view text, size_t byte_offset) {
  return static_cast<int64_t>(CodePointCount(text.substr(0, byte_offset)));
}

absl::StatusOr<bool> AffixMatches(const std::string& text, const Value& affix, bool prefix, absl::string_view method) {
  auto matches = [&](const Value& candidate) -> absl::StatusOr<bool> {
    if (!candidate.is_string()) {
      return ArgumentError(method, absl::StrCat("first arg must be str or a tuple of str, not ", TypeName(candidate)));
    }
    const std::string& s = candidate.string_value();
    if (s.size() > text.size()) return false;
    return prefix ? text.compare(0, s.size(), s) == 0 : text.compare(text.size() - s.size(), s.size(), s) == 0;
  };
  if (affix.is_list() && affix.list().is_tuple) {
    for (const Value& candidate : affix.list().items) {
      ASSIGN_OR_RETURN(bool matched, matches(candidate));
      if (matched) return true;
    }
    return false;
  }
  return matches(affix);
}

std::string Pad(const std::string& text, int64_t width, const std::string& fill, absl::string_view mode) {
  const int64_t length = static_cast<int64_t>(CodePointCount(text));
  if (width <= length) return text;
  const int64_t total = width - length;
  int64_t left = 0;
  if (mode == "center") {
    left = total / 2 + ((total & width & 1) ? 1 : 0);
  } else if (mode == "rjust") {
    left = total;
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += text;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

absl::StatusOr<Value> Format(const std::string& pattern, const CallArguments& arguments) {
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < pattern.size() && pattern[i + 1] == '}') {
      out.push_back('}');
      ++i;
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    const size_t close = pattern.find('}', i);
    if (close == std::string::npos) return absl::InvalidArgumentError("Single '{' encountered in format string");
    const std::string field = pattern.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      return absl::InvalidArgumentError("unsupported: format fields with conversions or format specs");
    }
    const Value* value = nullptr;
    if (field.empty()) {
      value = next_auto < arguments.positional.size() ? &arguments.positional[next_auto] : nullptr;
      ++next_auto;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = 0;
      const bool parsed = absl::SimpleAtoi(field, &index);
      value = parsed && index < arguments.positional.size() ? &arguments.positional[index] : nullptr;
    } else {
      value = arguments.Keyword(field);
    }
    if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat("format field '", field, "' has no argument"));
    out += ToPythonString(*value);
    i = close;
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> CallStringMethod(Interpreter& interpreter, const std::string& text, const std::string& name,
                                       const CallArguments& arguments) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ASSIGN_OR_RETURN(const std::string* chars, OptionalString(arguments, 0, "chars", name));
    return Value::String(Strip(text, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ASSIGN_OR_RETURN(const std::string* separator, OptionalString(arguments, 0, "sep", name));
    ASSIGN_OR_RETURN(int64_t max_split, OptionalInt(arguments, 1, "maxsplit", -1, name));
    RETURN_IF_ERROR(interpreter.budget().Build(text.size()));
    if (separator == nullptr) return Value::List(SplitOnWhitespace(text, max_split, name == "rsplit"));
    if (separator->empty()) return absl::InvalidArgumentError("empty separator");
    return Value::List(SplitOnSeparator(text, *separator, max_split, name == "rsplit"));
  }
  if (name == "splitlines") {
    std::vector<Value> lines;
    for (std::string& line : SplitLines(text)) lines.push_back(Value::String(std::move(line)));
    return Value::List(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* affix = arguments.Get(0, "prefix");
    if (affix == nullptr) return ArgumentError(name, "takes at least 1 argument (0 given)");
    if (arguments.positional.size() > 1) return absl::InvalidArgumentError("unsupported: start/end arguments");
    ASSIGN_OR_RETURN(bool matched, AffixMatches(text, *affix, name == "startswith", name));
    return Value::Bool(matched);
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(const std::string* old_text, RequiredString(arguments, 0, "old", name));
    ASSIGN_OR_RETURN(const std::string* new_text, RequiredString(arguments, 1, "new", name));
    ASSIGN_OR_RETURN(int64_t count, OptionalInt(arguments, 2, "count", -1, name));
    std::string out;
    size_t start = 0;
    int64_t done = 0;
    if (old_text->empty()) {
      // Python inserts `new` before every character and after the last.
      const std::vector<char32_t> characters = DecodeAll(text);
      const size_t insertions =
          std::min<size_t>(characters.size() + 1, count < 0 ? SIZE_MAX : static_cast<size_t>(count));
      RETURN_IF_ERROR(interpreter.budget().Build(text.size() + insertions * new_text->size()));
      for (size_t i = 0; i <= characters.size(); ++i) {
        if (i < insertions) out += *new_text;
        if (i < characters.size()) AppendCodePoint(characters[i], &out);
      }
      return Value::String(std::move(out));
    }
    while (count < 0 || done < count) {
      const size_t found = text.find(*old_text, start);
      if (found == std::string::npos) break;
      out.append(text, start, found - start);
      out += *new_text;
      start = found + old_text->size();
      ++done;
      if (out.size() > interpreter.budget().limits().max_output_bytes)
        RETURN_IF_ERROR(interpreter.budget().Build(out.size()));
    }
    out.append(text, start, std::string::npos);
    RETURN_IF_ERROR(interpreter.budget().Build(out.size()));
    return Value::String(std::move(out));
  }
  if (name == "upper") return Value::String(Upper(text));
  if (name == "lower") return Value::String(Lower(text));
  if (name == "title") return Value::String(TitleCase(text));
  if (name == "capitalize") return Value::String(Capitalize(text));
  if (name == "swapcase") {
    std::string out;
    size_t position = 0;
    while (position < text.size()) {
      const char32_t c = DecodeCodePoint(text, &position);
      AppendCodePoint(ToUpperCase(c) != c ? ToUpperCase(c) : ToLowerCase(c), &out);
    }
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    ASSIGN_OR_RETURN(const std::string* needle, RequiredString(arguments, 0, "sub", name));
    if (arguments.positional.size() > 1) return absl::InvalidArgumentError("unsupported: start/end arguments");
    if (name == "count") {
      if (needle->empty()) return Value::Int(static_cast<int64_t>(CodePointCount(text)) + 1);
      int64_t count = 0;
      for (size_t found = text.find(*needle); found != std::string::npos;
           found = text.find(*needle, found + needle->size())) {
        ++count;
      }
      return Value::Int(count);
    }
    const size_t found = (name == "find" || name == "index") ? text.find(*needle) : text.rfind(*needle);
    if (found == std::string::npos) {
      if (name == "index" || name == "rindex") return absl::InvalidArgumentError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CharacterIndex(text, found));
  }
  if (name == "join") {
    const Value* items = arguments.Get(0, "iterable");
    if (items == nullptr) return ArgumentError(name, "takes exactly one argument (0 given)");
    ASSIGN_OR_RETURN(std::vector<Value> parts, IterateValue(*items));
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence item ", i, ": expected str instance, ", TypeName(parts[i]), " found"));
      }
      if (i > 0) out += text;
      out += parts[i].string_value();
      if (out.size() > interpreter.budget().limits().max_output_bytes)
        RETURN_IF_ERROR(interpreter.budget().Build(out.size()));
    }
    RETURN_IF_ERROR(interpreter.budget().Build(out.size()));
    return Value::String(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    const std::vector<char32_t> characters = DecodeAll(text);
    if (characters.empty()) return Value::Bool(false);
    bool result = true;
    bool any_cased = false;
    for (char32_t c : characters) {
      if (name == "isdigit") result = result && c >= '0' && c <= '9';
      if (name == "isalpha") result = result && IsAlphaNumeric(c) && !(c >= '0' && c <= '9');
      if (name == "isalnum") result = result && IsAlphaNumeric(c);
      if (name == "isspace") result = result && IsPythonSpace(c);
      if (name == "isupper") result = result && ToUpperCase(c) == c;
      if (name == "islower") result = result && ToLowerCase(c) == c;
      any_cased = any_cased || IsCased(c);
    }
    if (name == "isupper" || name == "islower") result = result && any_cased;
    return Value::Bool(result);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ASSIGN_OR_RETURN(int64_t width, OptionalInt(arguments, 0, "width", 0, name));
    ASSIGN_OR_RETURN(const std::string* fill, OptionalString(arguments, 1, "fillchar", name));
    if (fill != nullptr && CodePointCount(*fill) != 1) {
      return absl::InvalidArgumentError("The fill character must be exactly one character long");
    }
    if (static_cast<uint64_t>(std::max<int64_t>(width, 0)) > interpreter.budget().limits().max_output_bytes) {
      return absl::ResourceExhaustedError("template built a string larger than the output limit");
    }
    RETURN_IF_ERROR(interpreter.budget().Build(static_cast<size_t>(std::max<int64_t>(width, 0)) * 4));
    return Value::String(Pad(text, width, fill == nullptr ? " " : *fill, name));
  }
  if (name == "zfill") {
    ASSIGN_OR_RETURN(int64_t width, OptionalInt(arguments, 0, "width", 0, name));
    RETURN_IF_ERROR(interpreter.budget().Build(static_cast<size_t>(std::max<int64_t>(width, 0))));
    const int64_t length = static_cast<int64_t>(CodePointCount(text));
    if (width <= length) return Value::String(text);
    std::string zeros(static_cast<size_t>(width - length), '0');
    if (!text.empty() && (text[0] == '-' || text[0] == '+'))
      return Value::String(text.substr(0, 1) + zeros + text.substr(1));
    return Value::String(zeros + text);
  }
  if (name == "partition" || name == "rpartition") {
    ASSIGN_OR_RETURN(const std::string* separator, RequiredString(arguments, 0, "sep", name));
    if (separator->empty()) return absl::InvalidArgumentError("empty separator");
    const size_t found = name == "partition" ? text.find(*separator) : text.rfind(*separator);
    if (found == std::string::npos) {
      return name == "partition" ? Value::Tuple({Value::String(text), Value::String(""), Value::String("")})
                                 : Value::Tuple({Value::String(""), Value::String(""), Value::String(text)});
    }
    return Value::Tuple({Value::String(text.substr(0, found)), Value::String(*separator),
                         Value::String(text.substr(found + separator->size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ASSIGN_OR_RETURN(const std::string* affix, RequiredString(arguments, 0, "affix", name));
    if (name == "removeprefix" && text.compare(0, affix->size(), *affix) == 0)
      return Value::String(text.substr(affix->size()));
    if (name == "removesuffix" && affix->size() <= text.size() && !affix->empty() &&
        text.compare(text.size() - affix->size(), affix->size(), *affix) == 0) {
      return Value::String(text.substr(0, text.size() - affix->size()));
    }
    return Value::String(text);
  }
  if (name == "format") {
    RETURN_IF_ERROR(interpreter.budget().Build(text.size()));
    return Format(text, arguments);
  }
  return absl::InvalidArgumentError(absl::StrCat("'str' object has no attribute '", name, "'"));
}

absl::StatusOr<Value> CallDictMethod(const Value& self, const std::string& name, const CallArguments& arguments) {
  const DictData& dict = self.dict();
  if (name == "items") {
    std::vector<Value> items;
    items.reserve(dict.entries.size());
    for (const auto& [key, value] : dict.entries) items.push_back(Value::Tuple({key, value}));
    return Value::List(std::move(items));
  }
  if (name == "keys" || name == "values") {
    std::vector<Value> items;
    items.reserve(dict.entries.size());
    for (const auto& [key, value] : dict.entries) items.push_back(name == "keys" ? key : value);
    return Value::List(std::move(items));
  }
  if (name == "get") {
    const Value* key = arguments.Get(0, "key");
    if (key == nullptr) return absl::InvalidArgumentError("get expected at least 1 argument, got 0");
    if (const Value* found = dict.Find(*key)) return *found;
    const Value* fallback = arguments.Get(1, "default");
    return fallback == nullptr ? Value::None() : *fallback;
  }
  if (name == "copy") return self;
  return absl::InvalidArgumentError(absl::StrCat("'dict' object has no attribute '", name, "'"));
}

absl::StatusOr<Value> CallListMethod(const Value& self, const std::string& name, const CallArguments& arguments) {
  const auto& items = self.list().items;
  if (name == "copy") return self;
  const Value* needle = arguments.Get(0, "value");
  if (needle == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " expected 1 argument"));
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equals(items[i], *needle)) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") return absl::InvalidArgumentError(absl::StrCat(ToPythonRepr(*needle), " is not in list"));
  return Value::Int(count);
}

}  // namespace

bool HasMethod(const Value& self, absl::string_view name) {
  switch (self.kind()) {
    case Value::Kind::kString:
      return Contains(kStringMethods, name);
    case Value::Kind::kDict:
      return Contains(kDictMethods, name);
    case Value::Kind::kList:
      return Contains(kListMethods, name);
    default:
      return false;
  }
}

bool IsUnsafeMethod(const Value& self, absl::string_view name) {
  if (self.is_dict()) return Contains(kUnsafeDictMethods, name);
  if (self.is_list()) return !self.list().is_tuple && Contains(kUnsafeListMethods, name);
  return false;
}

namespace {

Value EscapeIfString(const Value& value) { return value.is_string() ? EscapeToMarkup(value) : value; }

Value AsMarkup(const Value& value) {
  if (value.is_string()) return Value::Markup(value.string_value());
  if (!value.is_list()) return value;
  std::vector<Value> items;
  items.reserve(value.list().items.size());
  for (const Value& item : value.list().items) items.push_back(AsMarkup(item));
  return value.list().is_tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
}

absl::StatusOr<Value> CallMarkupMethod(Interpreter& interpreter, const Value& self, const std::string& name,
                                       const CallArguments& arguments) {
  CallArguments escaped;
  for (const Value& argument : arguments.positional) escaped.positional.push_back(EscapeIfString(argument));
  for (const auto& [keyword, argument] : arguments.keywords) {
    escaped.keywords.emplace_back(keyword, EscapeIfString(argument));
  }
  if (name == "join" && !escaped.positional.empty()) {
    ASSIGN_OR_RETURN(std::vector<Value> parts, IterateValue(escaped.positional[0]));
    for (Value& part : parts) part = EscapeIfString(part);
    escaped.positional[0] = Value::List(std::move(parts));
  }
  ASSIGN_OR_RETURN(Value result, CallStringMethod(interpreter, self.string_value(), name, escaped));
  return AsMarkup(result);
}

}  // namespace

absl::StatusOr<Value> CallMethod(Interpreter& interpreter, const Value& self, const std::string& name,
                                 const CallArguments& arguments) {
  switch (self.kind()) {
    case Value::Kind::kString:
      if (self.is_markup() && Contains(kMarkupMethods, name)) {
        return CallMarkupMethod(interpreter, self, name, arguments);
      }
      return CallStringMethod(interpreter, self.string_value(), name, arguments);
    case Value::Kind::kDict:
      return CallDictMethod(self, name, arguments);
    case Value::Kind::kList:
      return CallListMethod(self, name, arguments);
    default:
      return absl::InvalidArgumentError(absl::StrCat("'", TypeName(self), "' object has no method '", name, "'"));
  }
}

}  // namespace llmc::jinja
