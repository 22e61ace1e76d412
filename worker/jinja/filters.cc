// jinja2's built-in filters, with transformers' `tojson`.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "worker/jinja/builtins.h"
#include "worker/jinja/interpreter.h"
#include "worker/jinja/json_convert.h"
#include "worker/jinja/methods.h"
#include "worker/jinja/operators.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

constexpr absl::string_view kFilters[] = {
    "abs",     "attr",   "batch",  "capitalize", "center",     "count",      "d",      "default",    "dictsort",
    "e",       "escape", "first",  "float",      "indent",     "int",        "items",  "join",       "last",
    "length",  "list",   "lower",  "map",        "max",        "min",        "reject", "rejectattr", "replace",
    "reverse", "round",  "safe",   "select",     "selectattr", "sort",       "string", "sum",        "title",
    "tojson",  "trim",   "unique", "upper",      "wordcount",  "forceescape"};

// jinja2's soft_str: what a filter that works on text sees.
std::string TextOf(const Value& value) { return ToPythonString(value); }

bool FlagArgument(const CallArguments& arguments, size_t index, absl::string_view name, bool fallback) {
  const Value* value = arguments.Get(index, name);
  return value == nullptr ? fallback : IsTruthy(*value);
}

absl::StatusOr<int64_t> IntArgument(const CallArguments& arguments, size_t index, absl::string_view name,
                                    int64_t fallback) {
  const Value* value = arguments.Get(index, name);
  if (value == nullptr) return fallback;
  if (value->is_int() || value->is_bool()) return value->AsInt();
  if (value->is_float()) return static_cast<int64_t>(value->float_value());
  return absl::InvalidArgumentError(absl::StrCat("expected an integer argument '", name, "', got ", TypeName(*value)));
}

absl::StatusOr<Value> Length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kString:
      return Value::Int(static_cast<int64_t>(CodePointCount(value.string_value())));
    case Value::Kind::kList:
      return Value::Int(static_cast<int64_t>(value.list().items.size()));
    case Value::Kind::kDict:
      return Value::Int(static_cast<int64_t>(value.dict().entries.size()));
    case Value::Kind::kUndefined:
      return Value::Int(0);
    default:
      return absl::InvalidArgumentError(absl::StrCat("object of type '", TypeName(value), "' has no len()"));
  }
}

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// The key that sort, unique, min and max compare: strings lowercased unless case-sensitive.
Value SortKey(const Value& value, bool case_sensitive) {
  if (!case_sensitive && value.is_string()) return Value::String(Lower(value.string_value()));
  return value;
}

absl::StatusOr<Value> ToInteger(const Value& value, const Value& fallback, int64_t base) {
  if (value.is_int() || value.is_bool()) return Value::Int(value.AsInt());
  if (value.is_float()) {
    if (!std::isfinite(value.float_value()) || std::fabs(value.float_value()) >= 9.2e18) return fallback;
    return Value::Int(static_cast<int64_t>(value.float_value()));
  }
  if (!value.is_string()) return fallback;
  std::string text = Strip(value.string_value(), nullptr, true, true);
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  if (text.empty()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, static_cast<int>(base));
  if (errno == 0 && end != nullptr && *end == '\0') return Value::Int(parsed);
  double as_float;
  if (absl::SimpleAtod(text, &as_float) && std::isfinite(as_float) && std::fabs(as_float) < 9.2e18) {
    return Value::Int(static_cast<int64_t>(as_float));
  }
  return fallback;
}

absl::StatusOr<Value> ToFloat(const Value& value, const Value& fallback) {
  if (value.is_number()) return Value::Float(value.AsDouble());
  if (!value.is_string()) return fallback;
  const std::string text = Strip(value.string_value(), nullptr, true, true);
  double parsed;
  if (!text.empty() && absl::SimpleAtod(text, &parsed)) return Value::Float(parsed);
  return fallback;
}

double RoundHalfEven(double value, int64_t precision) {
  const double scale = std::pow(10.0, static_cast<double>(precision));
  return std::nearbyint(value * scale) / scale;
}

absl::StatusOr<Value> Indent(const std::string& text, const CallArguments& arguments) {
  std::string indentation = "    ";
  if (const Value* width = arguments.Get(0, "width")) {
    if (width->is_string()) {
      indentation = width->string_value();
    } else if (width->is_int() || width->is_bool()) {
      indentation = std::string(static_cast<size_t>(std::clamp<int64_t>(width->AsInt(), 0, 1 << 16)), ' ');
    } else {
      return absl::InvalidArgumentError("indent width must be an integer or a string");
    }
  }
  const bool first = FlagArgument(arguments, 1, "first", false);
  const bool blank = FlagArgument(arguments, 2, "blank", false);
  std::vector<std::string> lines = SplitLines(text + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indentation;
    }
    out += lines[i];
  }
  if (first) out = indentation + out;
  return Value::String(std::move(out));
}

absl::StatusOr<Value> ToJson(const Value& value, const CallArguments& arguments) {
  JsonDumpOptions options;
  options.ensure_ascii = FlagArgument(arguments, 0, "ensure_ascii", false);
  const Value* indent = arguments.Get(1, "indent");
  if (indent != nullptr && !indent->is_none()) {
    if (indent->is_string()) {
      options.indent = indent->string_value();
    } else if (indent->is_int() || indent->is_bool()) {
      options.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent->AsInt(), 0, 1 << 10)), ' ');
    } else {
      return absl::InvalidArgumentError("tojson indent must be an integer or a string");
    }
    options.item_separator = ",";
  }
  const Value* separators = arguments.Get(2, "separators");
  if (separators != nullptr && !separators->is_none()) {
    if (!separators->is_list() || separators->list().items.size() != 2 || !separators->list().items[0].is_string() ||
        !separators->list().items[1].is_string()) {
      return absl::InvalidArgumentError("tojson separators must be a pair of strings");
    }
    options.item_separator = separators->list().items[0].string_value();
    options.key_separator = separators->list().items[1].string_value();
  }
  options.sort_keys = FlagArgument(arguments, 3, "sort_keys", false);
  std::string out;
  RETURN_IF_ERROR(AppendJson(value, options, &out));
  return Value::String(std::move(out));
}

}  // namespace

bool IsKnownFilter(absl::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

// Arguments of a filter or test applied inside map/select: those after the name.
static CallArguments ShiftArguments(const CallArguments& arguments, size_t count) {
  CallArguments shifted;
  for (size_t i = count; i < arguments.positional.size(); ++i) shifted.positional.push_back(arguments.positional[i]);
  shifted.keywords = arguments.keywords;
  return shifted;
}

absl::StatusOr<Value> Interpreter::ApplyFilter(const std::string& name, const Value& input,
                                               const CallArguments& arguments) {
  // jinja2's make_attrgetter: "a.b.0" looks up each part as an item (numbers as indexes).
  auto attribute_of = [this](const Value& item, const std::string& path) -> absl::StatusOr<Value> {
    Value current = item;
    for (absl::string_view part : absl::StrSplit(path, '.')) {
      int64_t index;
      if (absl::SimpleAtoi(part, &index)) {
        ASSIGN_OR_RETURN(current, GetItem(current, Value::Int(index)));
      } else {
        ASSIGN_OR_RETURN(current, GetItem(current, Value::String(std::string(part))));
      }
    }
    return current;
  };
  auto key_of = [&](const Value& item, const Value* attribute) -> absl::StatusOr<Value> {
    if (attribute == nullptr || attribute->is_none()) return item;
    return attribute_of(item, ToPythonString(*attribute));
  };

  if (name == "default" || name == "d") {
    const Value* fallback = arguments.Get(0, "default_value");
    const bool boolean = FlagArgument(arguments, 1, "boolean", false);
    if (input.is_undefined() || (boolean && !IsTruthy(input)))
      return fallback == nullptr ? Value::String("") : *fallback;
    return input;
  }
  if (name == "length" || name == "count") return Length(input);
  if (name == "string") return Value::String(TextOf(input));
  if (name == "safe") return input.is_string() ? input : Value::String(TextOf(input));
  if (name == "escape" || name == "e" || name == "forceescape") return Value::String(HtmlEscape(TextOf(input)));
  if (name == "upper") return Value::String(Upper(TextOf(input)));
  if (name == "lower") return Value::String(Lower(TextOf(input)));
  if (name == "capitalize" || name == "title" || name == "center") {
    if (name == "title") {
      // jinja2's title: words begin after spaces, dashes and opening brackets.
      std::string out;
      bool at_word_start = true;
      const std::string text = TextOf(input);
      size_t position = 0;
      while (position < text.size()) {
        const char32_t c = DecodeCodePoint(text, &position);
        const bool separator = IsPythonSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        AppendCodePoint(separator ? c : (at_word_start ? ToUpperCase(c) : ToLowerCase(c)), &out);
        at_word_start = separator;
      }
      return Value::String(std::move(out));
    }
    CallArguments method_arguments = arguments;
    if (name == "center" && arguments.Get(0, "width") == nullptr) method_arguments.positional.push_back(Value::Int(80));
    return CallMethod(*this, Value::String(TextOf(input)), name, method_arguments);
  }
  if (name == "trim") {
    const Value* chars = arguments.Get(0, "chars");
    const std::string* chars_text = chars != nullptr && chars->is_string() ? &chars->string_value() : nullptr;
    return Value::String(Strip(TextOf(input), chars_text, true, true));
  }
  if (name == "replace") {
    CallArguments method_arguments;
    const Value* old_text = arguments.Get(0, "old");
    const Value* new_text = arguments.Get(1, "new");
    if (old_text == nullptr || new_text == nullptr) return absl::InvalidArgumentError("replace needs old and new");
    method_arguments.positional = {Value::String(TextOf(*old_text)), Value::String(TextOf(*new_text))};
    if (const Value* count = arguments.Get(2, "count"); count != nullptr && !count->is_none()) {
      method_arguments.positional.push_back(*count);
    }
    return CallMethod(*this, Value::String(TextOf(input)), "replace", method_arguments);
  }
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    const std::string text = TextOf(input);
    size_t position = 0;
    while (position < text.size()) {
      const char32_t c = DecodeCodePoint(text, &position);
      const bool word = IsAlphaNumeric(c) || c == '_';
      if (word && !in_word) ++words;
      in_word = word;
    }
    return Value::Int(words);
  }
  if (name == "indent") {
    if (input.is_undefined()) return UndefinedError(input);
    if (!input.is_string())
      return absl::InvalidArgumentError(absl::StrCat("indent needs a string, not ", TypeName(input)));
    return Indent(input.string_value(), arguments);
  }
  if (name == "tojson") return ToJson(input, arguments);
  if ((name == "int" || name == "float" || name == "abs" || name == "round") && input.is_undefined()) {
    return UndefinedError(input);
  }
  if (name == "int") {
    const Value* fallback = arguments.Get(0, "default");
    ASSIGN_OR_RETURN(int64_t base, IntArgument(arguments, 1, "base", 10));
    return ToInteger(input, fallback == nullptr ? Value::Int(0) : *fallback, base);
  }
  if (name == "float") {
    const Value* fallback = arguments.Get(0, "default");
    return ToFloat(input, fallback == nullptr ? Value::Float(0.0) : *fallback);
  }
  if (name == "abs") {
    if (input.is_float()) return Value::Float(std::fabs(input.float_value()));
    if (input.is_int() || input.is_bool()) {
      return input.AsInt() < 0 ? UnaryMinus(input, true) : Value::Int(input.AsInt());
    }
    return absl::InvalidArgumentError(absl::StrCat("bad operand type for abs(): '", TypeName(input), "'"));
  }
  if (name == "round") {
    ASSIGN_OR_RETURN(int64_t precision, IntArgument(arguments, 0, "precision", 0));
    const Value* method = arguments.Get(1, "method");
    const std::string how = method == nullptr ? "common" : TextOf(*method);
    if (!input.is_number())
      return absl::InvalidArgumentError(absl::StrCat("type ", TypeName(input), " doesn't define __round__ method"));
    const double value = input.AsDouble();
    const double scale = std::pow(10.0, static_cast<double>(precision));
    if (how == "common") {
      // Python's round() keeps an int an int.
      if (!input.is_float() && precision >= 0) return Value::Int(input.AsInt());
      return Value::Float(RoundHalfEven(value, precision));
    }
    if (how == "ceil") return Value::Float(std::ceil(value * scale) / scale);
    if (how == "floor") return Value::Float(std::floor(value * scale) / scale);
    return absl::InvalidArgumentError("method must be common, ceil or floor");
  }
  if (name == "attr") {
    const Value* attribute = arguments.Get(0, "name");
    if (attribute == nullptr) return absl::InvalidArgumentError("attr needs a name");
    return GetAttribute(input, TextOf(*attribute));
  }
  if (name == "items") {
    if (input.is_undefined()) return Value::List({});
    if (!input.is_dict()) return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
    return CallMethod(*this, input, "items", {});
  }
  if (name == "dictsort") {
    if (!input.is_dict()) return absl::InvalidArgumentError("You can only sort by either \"key\" or \"value\"");
    const bool case_sensitive = FlagArgument(arguments, 0, "case_sensitive", false);
    const Value* by = arguments.Get(1, "by");
    const bool by_value = by != nullptr && TextOf(*by) == "value";
    const bool reverse = FlagArgument(arguments, 2, "reverse", false);
    std::vector<std::pair<Value, Value>> entries = input.dict().entries;
    absl::Status error;
    std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
      absl::StatusOr<int> order = CompareOrder(SortKey(by_value ? a.second : a.first, case_sensitive),
                                               SortKey(by_value ? b.second : b.first, case_sensitive), "<");
      if (!order.ok()) {
        error.Update(order.status());
        return false;
      }
      return reverse ? *order == 1 : *order == -1;
    });
    RETURN_IF_ERROR(error);
    std::vector<Value> items;
    for (auto& [key, value] : entries) items.push_back(Value::Tuple({key, value}));
    return Value::List(std::move(items));
  }

  // Filters over sequences.
  ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(input));
  if (name == "list") return Value::List(std::move(items));
  if (name == "first") {
    if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
    return items.front();
  }
  if (name == "last") {
    if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
    return items.back();
  }
  if (name == "reverse") {
    if (input.is_string()) {
      std::vector<char32_t> characters = DecodeAll(input.string_value());
      std::reverse(characters.begin(), characters.end());
      return Value::String(EncodeAll(characters));
    }
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "join") {
    const Value* separator = arguments.Get(0, "d");
    const Value* attribute = arguments.Get(1, "attribute");
    const std::string glue = separator == nullptr ? "" : TextOf(*separator);
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      ASSIGN_OR_RETURN(Value item, key_of(items[i], attribute));
      if (i > 0) out += glue;
      out += TextOf(item);
      if (out.size() > budget_.limits().max_output_bytes) RETURN_IF_ERROR(budget_.Build(out.size()));
    }
    RETURN_IF_ERROR(budget_.Build(out.size()));
    return Value::String(std::move(out));
  }
  if (name == "map") {
    std::vector<Value> mapped;
    mapped.reserve(items.size());
    if (const Value* attribute = arguments.Keyword("attribute")) {
      const Value* fallback = arguments.Keyword("default");
      for (const Value& item : items) {
        ASSIGN_OR_RETURN(Value value, key_of(item, attribute));
        mapped.push_back(value.is_undefined() && fallback != nullptr ? *fallback : value);
      }
      return Value::List(std::move(mapped));
    }
    if (arguments.positional.empty()) return Value::List(std::move(items));
    const std::string filter = TextOf(arguments.positional[0]);
    if (!IsKnownFilter(filter)) return absl::InvalidArgumentError(absl::StrCat("No filter named '", filter, "'."));
    const CallArguments rest = ShiftArguments(arguments, 1);
    for (const Value& item : items) {
      RETURN_IF_ERROR(budget_.Step());
      ASSIGN_OR_RETURN(Value value, ApplyFilter(filter, item, rest));
      mapped.push_back(std::move(value));
    }
    return Value::List(std::move(mapped));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attribute = name == "selectattr" || name == "rejectattr";
    const bool keep_passing = name == "select" || name == "selectattr";
    std::string attribute;
    size_t test_index = 0;
    if (by_attribute) {
      if (arguments.positional.empty()) return absl::InvalidArgumentError("Missing parameter for attribute name");
      attribute = TextOf(arguments.positional[0]);
      test_index = 1;
    }
    const bool has_test = arguments.positional.size() > test_index;
    const std::string test = has_test ? TextOf(arguments.positional[test_index]) : "";
    if (has_test && !IsKnownTest(test)) return absl::InvalidArgumentError(absl::StrCat("No test named '", test, "'."));
    const CallArguments rest = ShiftArguments(arguments, test_index + 1);
    std::vector<Value> selected;
    for (const Value& item : items) {
      RETURN_IF_ERROR(budget_.Step());
      Value subject = item;
      if (by_attribute) {
        ASSIGN_OR_RETURN(subject, attribute_of(item, attribute));
      }
      bool passed;
      if (has_test) {
        ASSIGN_OR_RETURN(passed, ApplyTest(test, subject, rest));
      } else {
        passed = IsTruthy(subject);
      }
      if (passed == keep_passing) selected.push_back(item);
    }
    return Value::List(std::move(selected));
  }
  if (name == "unique" || name == "sort" || name == "min" || name == "max") {
    const bool case_sensitive = FlagArgument(arguments, name == "sort" ? 1 : 0, "case_sensitive", false);
    const Value* attribute = arguments.Get(name == "sort" ? 2 : 1, "attribute");
    std::vector<Value> keys;
    keys.reserve(items.size());
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value key, key_of(item, attribute));
      keys.push_back(SortKey(key, case_sensitive));
    }
    if (name == "unique") {
      std::vector<Value> unique;
      std::vector<Value> seen;
      for (size_t i = 0; i < items.size(); ++i) {
        RETURN_IF_ERROR(budget_.Step());
        bool duplicate = false;
        for (const Value& key : seen) duplicate = duplicate || Equals(key, keys[i]);
        if (duplicate) continue;
        seen.push_back(keys[i]);
        unique.push_back(items[i]);
      }
      return Value::List(std::move(unique));
    }
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    absl::Status error;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      absl::StatusOr<int> compared = CompareOrder(keys[a], keys[b], "<");
      if (!compared.ok()) {
        error.Update(compared.status());
        return false;
      }
      return *compared == -1;
    });
    RETURN_IF_ERROR(error);
    if (name == "min" || name == "max") {
      if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
      if (name == "min") return items[order.front()];
      // Python's max keeps the first of equal maxima.
      size_t best = order.back();
      for (size_t index : order) {
        if (Equals(keys[index], keys[best])) {
          best = index;
          break;
        }
      }
      return items[best];
    }
    if (FlagArgument(arguments, 0, "reverse", false)) {
      // Python's sort(reverse=True) keeps equal items in their original order.
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        absl::StatusOr<int> compared = CompareOrder(keys[a], keys[b], "<");
        return compared.ok() && *compared == 1;
      });
    }
    std::vector<Value> sorted;
    sorted.reserve(order.size());
    for (size_t index : order) sorted.push_back(items[index]);
    return Value::List(std::move(sorted));
  }
  if (name == "sum") {
    const Value* attribute = arguments.Get(0, "attribute");
    const Value* start = arguments.Get(1, "start");
    Value total = start == nullptr ? Value::Int(0) : *start;
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value value, key_of(item, attribute));
      ASSIGN_OR_RETURN(total, BinaryOperation("+", total, value, budget_));
    }
    return total;
  }
  if (name == "batch") {
    ASSIGN_OR_RETURN(int64_t size, IntArgument(arguments, 0, "linecount", 1));
    if (size <= 0) return absl::InvalidArgumentError("batch size must be positive");
    const Value* fill = arguments.Get(1, "fill_with");
    std::vector<Value> batches;
    std::vector<Value> current;
    for (const Value& item : items) {
      current.push_back(item);
      if (static_cast<int64_t>(current.size()) == size) {
        batches.push_back(Value::List(std::move(current)));
        current.clear();
      }
    }
    if (!current.empty()) {
      if (fill != nullptr && !fill->is_none()) {
        while (static_cast<int64_t>(current.size()) < size) current.push_back(*fill);
      }
      batches.push_back(Value::List(std::move(current)));
    }
    return Value::List(std::move(batches));
  }
  return absl::InvalidArgumentError(absl::StrCat("No filter named '", name, "'."));
}

}  // namespace llmc::jinja
