// jinja2's built-in filters, with transformers' `tojson`: the table of every filter, and those over one value
// (those over a sequence are in sequence_filters.cc).
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
#include "worker/jinja/filter_call.h"
#include "worker/jinja/interpreter.h"
#include "worker/jinja/json_convert.h"
#include "worker/jinja/methods.h"
#include "worker/jinja/operators.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

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

absl::StatusOr<Value> DefaultFilter(FilterCall& call) {
  const Value* fallback = call.arguments.Get(0, "default_value");
  const bool boolean = FlagArgument(call.arguments, 1, "boolean", false);
  if (call.input.is_undefined() || (boolean && !IsTruthy(call.input))) {
    return fallback == nullptr ? Value::String("") : *fallback;
  }
  return call.input;
}

absl::StatusOr<Value> LengthFilter(FilterCall& call) { return Length(call.input); }
// jinja2's soft_str keeps a string (Markup included) as it is.
absl::StatusOr<Value> StringFilter(FilterCall& call) {
  return call.input.is_string() ? call.input : Value::String(TextOf(call.input));
}
absl::StatusOr<Value> SafeFilter(FilterCall& call) {
  return call.input.is_markup() ? call.input : Value::Markup(TextOf(call.input));
}
// escape leaves Markup as it is; forceescape escapes it too.
absl::StatusOr<Value> EscapeFilter(FilterCall& call) {
  if (call.name == "forceescape") return Value::Markup(HtmlEscape(TextOf(call.input)));
  return EscapeToMarkup(call.input);
}
absl::StatusOr<Value> UpperFilter(FilterCall& call) { return StringLike(call.input, Upper(TextOf(call.input))); }
absl::StatusOr<Value> LowerFilter(FilterCall& call) { return StringLike(call.input, Lower(TextOf(call.input))); }

// jinja2's title: words begin after spaces, dashes and opening brackets.
absl::StatusOr<Value> TitleFilter(FilterCall& call) {
  std::string out;
  bool at_word_start = true;
  const std::string text = TextOf(call.input);
  size_t position = 0;
  while (position < text.size()) {
    const char32_t c = DecodeCodePoint(text, &position);
    const bool separator = IsPythonSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    AppendCodePoint(separator ? c : (at_word_start ? ToUpperCase(c) : ToLowerCase(c)), &out);
    at_word_start = separator;
  }
  return Value::String(std::move(out));
}

// capitalize and center: the string methods of the same names (center's width defaults to 80).
absl::StatusOr<Value> StringMethodFilter(FilterCall& call) {
  CallArguments method_arguments = call.arguments;
  if (call.name == "center" && call.arguments.Get(0, "width") == nullptr) {
    method_arguments.positional.push_back(Value::Int(80));
  }
  const Value text = call.input.is_string() ? call.input : Value::String(TextOf(call.input));
  return CallMethod(call.interpreter, text, call.name, method_arguments);
}

absl::StatusOr<Value> TrimFilter(FilterCall& call) {
  const Value* chars = call.arguments.Get(0, "chars");
  if (call.input.is_markup()) {
    // Markup's strip, which escapes the characters it is given.
    CallArguments method_arguments;
    if (chars != nullptr) method_arguments.positional.push_back(*chars);
    return CallMethod(call.interpreter, call.input, "strip", method_arguments);
  }
  const std::string* chars_text = chars != nullptr && chars->is_string() ? &chars->string_value() : nullptr;
  return Value::String(Strip(TextOf(call.input), chars_text, true, true));
}

absl::StatusOr<Value> ReplaceFilter(FilterCall& call) {
  CallArguments method_arguments;
  const Value* old_text = call.arguments.Get(0, "old");
  const Value* new_text = call.arguments.Get(1, "new");
  if (old_text == nullptr || new_text == nullptr) return absl::InvalidArgumentError("replace needs old and new");
  method_arguments.positional = {Value::String(TextOf(*old_text)), Value::String(TextOf(*new_text))};
  if (const Value* count = call.arguments.Get(2, "count"); count != nullptr && !count->is_none()) {
    method_arguments.positional.push_back(*count);
  }
  return CallMethod(call.interpreter, Value::String(TextOf(call.input)), "replace", method_arguments);
}

absl::StatusOr<Value> WordcountFilter(FilterCall& call) {
  int64_t words = 0;
  bool in_word = false;
  const std::string text = TextOf(call.input);
  size_t position = 0;
  while (position < text.size()) {
    const char32_t c = DecodeCodePoint(text, &position);
    const bool word = IsAlphaNumeric(c) || c == '_';
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::Int(words);
}

absl::StatusOr<Value> IndentFilter(FilterCall& call) {
  if (call.input.is_undefined()) return UndefinedError(call.input);
  if (!call.input.is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("indent needs a string, not ", TypeName(call.input)));
  }
  ASSIGN_OR_RETURN(Value indented, Indent(call.input.string_value(), call.arguments));
  return StringLike(call.input, indented.string_value());
}

absl::StatusOr<Value> ToJsonFilter(FilterCall& call) { return ToJson(call.input, call.arguments); }

absl::StatusOr<Value> IntFilter(FilterCall& call) {
  if (call.input.is_undefined()) return UndefinedError(call.input);
  const Value* fallback = call.arguments.Get(0, "default");
  ASSIGN_OR_RETURN(int64_t base, IntArgument(call.arguments, 1, "base", 10));
  return ToInteger(call.input, fallback == nullptr ? Value::Int(0) : *fallback, base);
}

absl::StatusOr<Value> FloatFilter(FilterCall& call) {
  if (call.input.is_undefined()) return UndefinedError(call.input);
  const Value* fallback = call.arguments.Get(0, "default");
  return ToFloat(call.input, fallback == nullptr ? Value::Float(0.0) : *fallback);
}

absl::StatusOr<Value> AbsFilter(FilterCall& call) {
  const Value& input = call.input;
  if (input.is_undefined()) return UndefinedError(input);
  if (input.is_float()) return Value::Float(std::fabs(input.float_value()));
  if (input.is_int() || input.is_bool()) return input.AsInt() < 0 ? UnaryMinus(input, true) : Value::Int(input.AsInt());
  return absl::InvalidArgumentError(absl::StrCat("bad operand type for abs(): '", TypeName(input), "'"));
}

absl::StatusOr<Value> RoundFilter(FilterCall& call) {
  const Value& input = call.input;
  if (input.is_undefined()) return UndefinedError(input);
  ASSIGN_OR_RETURN(int64_t precision, IntArgument(call.arguments, 0, "precision", 0));
  const Value* method = call.arguments.Get(1, "method");
  const std::string how = method == nullptr ? "common" : TextOf(*method);
  if (!input.is_number()) {
    return absl::InvalidArgumentError(absl::StrCat("type ", TypeName(input), " doesn't define __round__ method"));
  }
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

absl::StatusOr<Value> AttrFilter(FilterCall& call) {
  const Value* attribute = call.arguments.Get(0, "name");
  if (attribute == nullptr) return absl::InvalidArgumentError("attr needs a name");
  return call.interpreter.GetAttribute(call.input, TextOf(*attribute));
}

absl::StatusOr<Value> ItemsFilter(FilterCall& call) {
  if (call.input.is_undefined()) return Value::List({});
  if (!call.input.is_dict()) return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
  return CallMethod(call.interpreter, call.input, "items", {});
}

absl::StatusOr<Value> DictsortFilter(FilterCall& call) {
  if (!call.input.is_dict()) return absl::InvalidArgumentError("You can only sort by either \"key\" or \"value\"");
  const bool case_sensitive = FlagArgument(call.arguments, 0, "case_sensitive", false);
  const Value* by = call.arguments.Get(1, "by");
  const bool by_value = by != nullptr && TextOf(*by) == "value";
  const bool reverse = FlagArgument(call.arguments, 2, "reverse", false);
  std::vector<std::pair<Value, Value>> entries = call.input.dict().entries;
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

// What a filter is given: the value, or its items (FilterCall::items). jinja2's select, reject,
// selectattr, rejectattr and map begin with `if value:`, so a false input (none, undefined, "", 0, an empty
// list) yields nothing where the other filters over sequences would fail to iterate it.
enum class Input { kValue, kItems, kItemsOfTrueValue };

struct FilterEntry {
  absl::string_view name;
  FilterFunction apply;
  Input input;
};

// Every filter the interpreter implements; a template naming another is refused when it loads.
constexpr FilterEntry kFilters[] = {
    {"abs", AbsFilter, Input::kValue},
    {"attr", AttrFilter, Input::kValue},
    {"batch", BatchFilter, Input::kItems},
    {"capitalize", StringMethodFilter, Input::kValue},
    {"center", StringMethodFilter, Input::kValue},
    {"count", LengthFilter, Input::kValue},
    {"d", DefaultFilter, Input::kValue},
    {"default", DefaultFilter, Input::kValue},
    {"dictsort", DictsortFilter, Input::kValue},
    {"e", EscapeFilter, Input::kValue},
    {"escape", EscapeFilter, Input::kValue},
    {"first", FirstFilter, Input::kItems},
    {"float", FloatFilter, Input::kValue},
    {"forceescape", EscapeFilter, Input::kValue},
    {"indent", IndentFilter, Input::kValue},
    {"int", IntFilter, Input::kValue},
    {"items", ItemsFilter, Input::kValue},
    {"join", JoinFilter, Input::kItems},
    {"last", LastFilter, Input::kItems},
    {"length", LengthFilter, Input::kValue},
    {"list", ListFilter, Input::kItems},
    {"lower", LowerFilter, Input::kValue},
    {"map", MapFilter, Input::kItemsOfTrueValue},
    {"max", OrderFilter, Input::kItems},
    {"min", OrderFilter, Input::kItems},
    {"reject", SelectFilter, Input::kItemsOfTrueValue},
    {"rejectattr", SelectFilter, Input::kItemsOfTrueValue},
    {"replace", ReplaceFilter, Input::kValue},
    {"reverse", ReverseFilter, Input::kItems},
    {"round", RoundFilter, Input::kValue},
    {"safe", SafeFilter, Input::kValue},
    {"select", SelectFilter, Input::kItemsOfTrueValue},
    {"selectattr", SelectFilter, Input::kItemsOfTrueValue},
    {"sort", OrderFilter, Input::kItems},
    {"string", StringFilter, Input::kValue},
    {"sum", SumFilter, Input::kItems},
    {"title", TitleFilter, Input::kValue},
    {"tojson", ToJsonFilter, Input::kValue},
    {"trim", TrimFilter, Input::kValue},
    {"unique", OrderFilter, Input::kItems},
    {"upper", UpperFilter, Input::kValue},
    {"wordcount", WordcountFilter, Input::kValue},
};

const FilterEntry* FindFilter(absl::string_view name) {
  for (const FilterEntry& entry : kFilters) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace

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

absl::StatusOr<Value> AttributeOf(Interpreter& interpreter, const Value& item, const std::string& path) {
  Value current = item;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    int64_t index;
    if (absl::SimpleAtoi(part, &index)) {
      ASSIGN_OR_RETURN(current, interpreter.GetItem(current, Value::Int(index)));
    } else {
      ASSIGN_OR_RETURN(current, interpreter.GetItem(current, Value::String(std::string(part))));
    }
  }
  return current;
}

absl::StatusOr<Value> KeyOf(Interpreter& interpreter, const Value& item, const Value* attribute) {
  if (attribute == nullptr || attribute->is_none()) return item;
  return AttributeOf(interpreter, item, ToPythonString(*attribute));
}

Value SortKey(const Value& value, bool case_sensitive) {
  if (!case_sensitive && value.is_string()) return Value::String(Lower(value.string_value()));
  return value;
}

CallArguments ShiftArguments(const CallArguments& arguments, size_t count) {
  CallArguments shifted;
  for (size_t i = count; i < arguments.positional.size(); ++i) shifted.positional.push_back(arguments.positional[i]);
  shifted.keywords = arguments.keywords;
  return shifted;
}

bool IsKnownFilter(absl::string_view name) { return FindFilter(name) != nullptr; }

absl::StatusOr<Value> Interpreter::ApplyFilter(const std::string& name, const Value& input,
                                               const CallArguments& arguments) {
  const FilterEntry* filter = FindFilter(name);
  if (filter == nullptr) return absl::InvalidArgumentError(absl::StrCat("No filter named '", name, "'."));
  FilterCall call{*this, name, input, arguments, {}};
  if (filter->input == Input::kItemsOfTrueValue && !IsTruthy(input)) return Value::List({});
  if (filter->input != Input::kValue) {
    ASSIGN_OR_RETURN(call.items, IterateValue(input));
  }
  return filter->apply(call);
}

}  // namespace llmc::jinja
