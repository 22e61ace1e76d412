#include "worker/jinja/operators.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

absl::Status TypeError(absl::string_view op, const Value& left, const Value& right) {
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported operand type(s) for ", op, ": '", TypeName(left), "' and '", TypeName(right), "'"));
}

absl::Status Overflow() { return absl::InvalidArgumentError("integer overflow"); }

int64_t FloorDivide(int64_t a, int64_t b) {
  int64_t quotient = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --quotient;
  return quotient;
}

int64_t FloorModulo(int64_t a, int64_t b) {
  const int64_t remainder = a % b;
  return (remainder != 0 && ((remainder < 0) != (b < 0))) ? remainder + b : remainder;
}

double FloatModulo(double a, double b) {
  double remainder = std::fmod(a, b);
  if (remainder != 0 && ((remainder < 0) != (b < 0))) remainder += b;
  return remainder;
}

absl::StatusOr<Value> Repeat(const Value& sequence, int64_t count, RenderBudget& budget) {
  if (count < 0) count = 0;
  if (sequence.is_string()) {
    const std::string& text = sequence.string_value();
    if (text.empty()) return StringLike(sequence, "");  // else '' * 2**62 would loop that many times
    if (!text.empty() && static_cast<uint64_t>(count) > budget.limits().max_output_bytes / text.size()) {
      return absl::ResourceExhaustedError("template built a string larger than the output limit");
    }
    RETURN_IF_ERROR(budget.Build(text.size() * static_cast<size_t>(count)));
    std::string out;
    out.reserve(text.size() * static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) out += text;
    return StringLike(sequence, std::move(out));
  }
  const ListData& list = sequence.list();
  if (list.items.empty()) count = 0;
  if (!list.items.empty() && static_cast<uint64_t>(count) > budget.limits().max_output_bytes / list.items.size()) {
    return absl::ResourceExhaustedError("template built a list larger than the output limit");
  }
  RETURN_IF_ERROR(budget.Build(list.items.size() * static_cast<size_t>(count) * sizeof(Value)));
  std::vector<Value> items;
  for (int64_t i = 0; i < count; ++i) items.insert(items.end(), list.items.begin(), list.items.end());
  return list.is_tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
}

absl::StatusOr<Value> Power(const Value& left, const Value& right) {
  if (left.is_float() || right.is_float() || right.AsInt() < 0) {
    const double base = left.AsDouble();
    const double exponent = right.AsDouble();
    if (base == 0 && exponent < 0) {
      return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
    }
    const double result = std::pow(base, exponent);
    if (std::isinf(result) && std::isfinite(base) && std::isfinite(exponent)) {
      return absl::InvalidArgumentError("(34, 'Numerical result out of range')");
    }
    if (std::isnan(result) && !std::isnan(base) && !std::isnan(exponent)) {
      return absl::InvalidArgumentError("math domain error: complex result");
    }
    return Value::Float(result);
  }
  int64_t base = left.AsInt();
  int64_t exponent = right.AsInt();
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value::Int(result);
}

absl::StatusOr<Value> Arithmetic(char op, const Value& left, const Value& right) {
  if (!left.is_float() && !right.is_float()) {
    const int64_t a = left.AsInt();
    const int64_t b = right.AsInt();
    int64_t result;
    switch (op) {
      case '+':
        if (__builtin_add_overflow(a, b, &result)) return Overflow();
        return Value::Int(result);
      case '-':
        if (__builtin_sub_overflow(a, b, &result)) return Overflow();
        return Value::Int(result);
      case '*':
        if (__builtin_mul_overflow(a, b, &result)) return Overflow();
        return Value::Int(result);
      case '/':
        if (b == 0) return absl::InvalidArgumentError("division by zero");
        return Value::Float(static_cast<double>(a) / static_cast<double>(b));
      case 'f':
        if (b == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
        if (a == std::numeric_limits<int64_t>::min() && b == -1) return Overflow();
        return Value::Int(FloorDivide(a, b));
      case '%':
        if (b == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
        if (b == -1) return Value::Int(0);
        return Value::Int(FloorModulo(a, b));
    }
  }
  const double a = left.AsDouble();
  const double b = right.AsDouble();
  switch (op) {
    case '+':
      return Value::Float(a + b);
    case '-':
      return Value::Float(a - b);
    case '*':
      return Value::Float(a * b);
    case '/':
      if (b == 0) return absl::InvalidArgumentError("float division by zero");
      return Value::Float(a / b);
    case 'f':
      if (b == 0) return absl::InvalidArgumentError("float floor division by zero");
      return Value::Float(std::floor(a / b));
    case '%':
      if (b == 0) return absl::InvalidArgumentError("float modulo");
      return Value::Float(FloatModulo(a, b));
  }
  return absl::InternalError("unknown arithmetic operator");
}

}  // namespace

absl::Status UndefinedError(const Value& value) { return absl::InvalidArgumentError(value.undefined_hint()); }

absl::StatusOr<Value> BinaryOperation(absl::string_view op, const Value& left, const Value& right,
                                      RenderBudget& budget) {
  if (op == "~") {
    std::string text = ToPythonString(left);
    const std::string right_text = ToPythonString(right);
    RETURN_IF_ERROR(budget.Build(text.size() + right_text.size()));
    text += right_text;
    return Value::String(std::move(text));
  }
  if (left.is_undefined()) return UndefinedError(left);
  if (right.is_undefined()) return UndefinedError(right);
  if (left.is_number() && right.is_number()) {
    if (op == "**") return Power(left, right);
    const char code = op == "//" ? 'f' : op[0];
    return Arithmetic(code, left, right);
  }
  if (op == "+") {
    if (left.is_string() && right.is_string()) {
      if (left.is_markup() || right.is_markup()) {
        // Markup's + (and its reflected +) escapes the plain string it is joined to.
        const std::string joined = EscapeToMarkup(left).string_value() + EscapeToMarkup(right).string_value();
        RETURN_IF_ERROR(budget.Build(joined.size()));
        return Value::Markup(joined);
      }
      RETURN_IF_ERROR(budget.Build(left.string_value().size() + right.string_value().size()));
      return Value::String(left.string_value() + right.string_value());
    }
    if (left.is_list() && right.is_list() && left.list().is_tuple == right.list().is_tuple) {
      const size_t size = left.list().items.size() + right.list().items.size();
      RETURN_IF_ERROR(budget.Build(size * sizeof(Value)));
      std::vector<Value> items = left.list().items;
      items.insert(items.end(), right.list().items.begin(), right.list().items.end());
      return left.list().is_tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
    }
  }
  if (op == "*") {
    if ((left.is_string() || left.is_list()) && (right.is_int() || right.is_bool())) {
      return Repeat(left, right.AsInt(), budget);
    }
    if ((right.is_string() || right.is_list()) && (left.is_int() || left.is_bool())) {
      return Repeat(right, left.AsInt(), budget);
    }
  }
  if (op == "%" && left.is_string()) {
    return absl::InvalidArgumentError("unsupported: printf-style string formatting with %");
  }
  return TypeError(op, left, right);
}

absl::StatusOr<Value> UnaryMinus(const Value& operand, bool negate) {
  if (operand.is_undefined()) return UndefinedError(operand);
  if (operand.is_float()) return Value::Float(negate ? -operand.float_value() : operand.float_value());
  if (operand.is_int() || operand.is_bool()) {
    const int64_t value = operand.AsInt();
    if (!negate) return Value::Int(value);
    if (value == std::numeric_limits<int64_t>::min()) return Overflow();
    return Value::Int(-value);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad operand type for unary ", negate ? "-" : "+", ": '", TypeName(operand), "'"));
}

absl::StatusOr<int> CompareOrder(const Value& left, const Value& right, absl::string_view op) {
  if (left.is_undefined()) return UndefinedError(left);
  if (right.is_undefined()) return UndefinedError(right);
  if (left.is_number() && right.is_number()) {
    if (left.is_float() || right.is_float()) {
      const double a = left.AsDouble();
      const double b = right.AsDouble();
      if (std::isnan(a) || std::isnan(b)) return 2;  // unordered: every comparison is false
      return a < b ? -1 : (a > b ? 1 : 0);
    }
    return left.AsInt() < right.AsInt() ? -1 : (left.AsInt() > right.AsInt() ? 1 : 0);
  }
  if (left.is_string() && right.is_string()) {
    const int order = left.string_value().compare(right.string_value());
    return order < 0 ? -1 : (order > 0 ? 1 : 0);
  }
  if (left.is_list() && right.is_list() && left.list().is_tuple == right.list().is_tuple) {
    const auto& a = left.list().items;
    const auto& b = right.list().items;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (Equals(a[i], b[i])) continue;
      return CompareOrder(a[i], b[i], op);
    }
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", op, "' not supported between instances of '", TypeName(left), "' and '", TypeName(right), "'"));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return container.string_value().find(item.string_value()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& element : container.list().items) {
        if (Equals(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.dict().Find(item) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      return absl::InvalidArgumentError(absl::StrCat("argument of type '", TypeName(container), "' is not iterable"));
  }
}

absl::StatusOr<std::vector<Value>> IterateValue(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kList:
      return value.list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(value.dict().entries.size());
      for (const auto& [key, unused] : value.dict().entries) keys.push_back(key);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> characters;
      const std::string& text = value.string_value();
      size_t position = 0;
      while (position < text.size()) {
        const size_t start = position;
        DecodeCodePoint(text, &position);
        characters.push_back(Value::String(text.substr(start, position - start)));
      }
      return characters;
    }
    case Value::Kind::kUndefined:
      return std::vector<Value>();
    default:
      return absl::InvalidArgumentError(absl::StrCat("'", TypeName(value), "' object is not iterable"));
  }
}

}  // namespace llmc::jinja
