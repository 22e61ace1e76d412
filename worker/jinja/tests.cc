// jinja2's built-in tests (`x is defined`, `n is divisibleby 3`, ...).
#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/builtins.h"
#include "worker/jinja/interpreter.h"
#include "worker/jinja/operators.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

constexpr absl::string_view kTests[] = {"defined",  "undefined",   "none",   "boolean",     "false",    "true",
                                        "integer",  "float",       "number", "string",      "mapping",  "iterable",
                                        "sequence", "callable",    "sameas", "escaped",     "in",       "even",
                                        "odd",      "divisibleby", "lower",  "upper",       "eq",       "equalto",
                                        "==",       "ne",          "!=",     "lt",          "lessthan", "<",
                                        "le",       "<=",          "gt",     "greaterthan", ">",        "ge",
                                        ">=",       "filter",      "test"};

absl::StatusOr<const Value*> RequiredArgument(const CallArguments& arguments, absl::string_view test) {
  const Value* value = arguments.Get(0, "value");
  if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat("test '", test, "' needs an argument"));
  return value;
}

}  // namespace

bool IsKnownTest(absl::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

absl::StatusOr<bool> Interpreter::ApplyTest(const std::string& name, const Value& input,
                                            const CallArguments& arguments) {
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "boolean") return input.is_bool();
  if (name == "true") return input.is_bool() && input.bool_value();
  if (name == "false") return input.is_bool() && !input.bool_value();
  if (name == "integer") return input.is_int();
  if (name == "float") return input.is_float();
  if (name == "number") return input.is_number();
  if (name == "string") return input.is_string();
  if (name == "mapping") return input.is_dict();
  // jinja2's Undefined defines __iter__, __len__ and __getitem__, so it counts as iterable and a sequence.
  if (name == "iterable" || name == "sequence") {
    return input.is_string() || input.is_list() || input.is_dict() || input.is_undefined();
  }
  if (name == "callable") return input.is_callable();
  if (name == "escaped") return false;
  if (name == "filter") return input.is_string() && IsKnownFilter(input.string_value());
  if (name == "test") return input.is_string() && IsKnownTest(input.string_value());
  if (name == "lower" || name == "upper") {
    const std::string text = ToPythonString(input);
    bool any_cased = false;
    size_t position = 0;
    while (position < text.size()) {
      const char32_t c = DecodeCodePoint(text, &position);
      if (name == "lower" ? ToLowerCase(c) != c : ToUpperCase(c) != c) return false;
      any_cased = any_cased || IsCased(c);
    }
    return any_cased;
  }
  if (name == "even" || name == "odd") {
    ASSIGN_OR_RETURN(Value remainder, BinaryOperation("%", input, Value::Int(2), budget_));
    return remainder.AsDouble() == (name == "odd" ? 1 : 0);
  }
  if (name == "divisibleby") {
    ASSIGN_OR_RETURN(const Value* divisor, RequiredArgument(arguments, name));
    ASSIGN_OR_RETURN(Value remainder, BinaryOperation("%", input, *divisor, budget_));
    return remainder.AsDouble() == 0;
  }
  ASSIGN_OR_RETURN(const Value* other, RequiredArgument(arguments, name));
  if (name == "sameas") {
    if (input.kind() != other->kind()) return false;
    if (input.is_none() || input.is_undefined()) return true;
    if (input.is_bool()) return input.bool_value() == other->bool_value();
    return Equals(input, *other) && (input.is_int() || input.is_namespace() || input.is_callable());
  }
  if (name == "in") return Contains(*other, input);
  if (name == "eq" || name == "equalto" || name == "==") return Equals(input, *other);
  if (name == "ne" || name == "!=") return !Equals(input, *other);
  ASSIGN_OR_RETURN(int order, CompareOrder(input, *other, name));
  if (name == "lt" || name == "lessthan" || name == "<") return order == -1;
  if (name == "le" || name == "<=") return order == -1 || order == 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return order == 1;
  return order == 1 || order == 0;
}

}  // namespace llmc::jinja
