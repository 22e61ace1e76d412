// Attribute access, subscripts, slices and the built-in global functions of the interpreter.
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/callable.h"
#include "worker/jinja/interpreter.h"
#include "worker/jinja/methods.h"
#include "worker/jinja/operators.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

// jinja2's object_type_repr, which its undefined messages use.
std::string ObjectDescription(const Value& value) {
  if (value.is_none()) return "None";
  return absl::StrCat("'", TypeName(value), " object'");
}

Value MissingAttribute(const Value& object, absl::string_view name) {
  return Value::Undefined(absl::StrCat(ObjectDescription(object), " has no attribute '", name, "'"));
}

Value BoundMethod(const Value& object, const std::string& name) {
  auto method = std::make_shared<Callable>();
  method->type = Callable::Type::kBoundMethod;
  method->name = name;
  method->self = object;
  return Value::Function(std::move(method));
}

// Python's slice.indices(length) followed by the walk it describes.
absl::StatusOr<std::vector<size_t>> SliceIndices(const Value* start, const Value* stop, const Value* step,
                                                 int64_t length) {
  auto as_index = [](const Value* value, int64_t* out) -> absl::Status {
    if (value == nullptr || value->is_none()) return absl::OkStatus();
    if (!value->is_int() && !value->is_bool()) {
      return absl::InvalidArgumentError("slice indices must be integers or None or have an __index__ method");
    }
    *out = value->AsInt();
    return absl::OkStatus();
  };
  int64_t step_value = 1;
  RETURN_IF_ERROR(as_index(step, &step_value));
  if (step_value == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  if (step_value == std::numeric_limits<int64_t>::min()) step_value = -std::numeric_limits<int64_t>::max();
  const bool backwards = step_value < 0;
  int64_t start_value = backwards ? length - 1 : 0;
  int64_t stop_value = backwards ? -1 : length;
  const bool has_start = start != nullptr && !start->is_none();
  const bool has_stop = stop != nullptr && !stop->is_none();
  RETURN_IF_ERROR(as_index(start, &start_value));
  RETURN_IF_ERROR(as_index(stop, &stop_value));
  auto clamp = [&](int64_t value) {
    if (value < 0) {
      value = value < -length ? (backwards ? -1 : 0) : value + length;
    } else if (value >= length) {
      value = backwards ? length - 1 : length;
    }
    return value;
  };
  if (has_start) start_value = clamp(start_value);
  if (has_stop) stop_value = clamp(stop_value);
  std::vector<size_t> indices;
  if (backwards) {
    for (int64_t i = start_value; i > stop_value; i += step_value) {
      indices.push_back(static_cast<size_t>(i));
      if (i < std::numeric_limits<int64_t>::min() - step_value) break;
    }
  } else {
    for (int64_t i = start_value; i < stop_value; i += step_value) {
      indices.push_back(static_cast<size_t>(i));
      if (i > std::numeric_limits<int64_t>::max() - step_value) break;
    }
  }
  return indices;
}

}  // namespace

absl::StatusOr<Value> Interpreter::GetAttribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(object);
    case Value::Kind::kNamespace: {
      const Value* value = object.namespace_data().Find(name);
      if (value != nullptr) return *value;
      return MissingAttribute(object, name);
    }
    case Value::Kind::kDict:
      if (HasMethod(object, name)) return BoundMethod(object, name);
      if (const Value* value = object.dict().FindString(name)) return *value;
      break;
    default:
      if (HasMethod(object, name)) return BoundMethod(object, name);
      break;
  }
  if (IsUnsafeMethod(object, name)) {
    return Value::Undefined(
        absl::StrCat("access to attribute '", name, "' of '", TypeName(object), "' object is unsafe."));
  }
  return MissingAttribute(object, name);
}

absl::StatusOr<Value> Interpreter::GetItem(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(object);
    case Value::Kind::kDict:
      if (const Value* value = object.dict().Find(key)) return *value;
      break;
    case Value::Kind::kList:
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        int64_t index = key.AsInt();
        if (object.is_list()) {
          const int64_t size = static_cast<int64_t>(object.list().items.size());
          if (index < 0) index += size;
          if (index >= 0 && index < size) return object.list().items[static_cast<size_t>(index)];
        } else {
          const std::vector<char32_t> characters = DecodeAll(object.string_value());
          const int64_t size = static_cast<int64_t>(characters.size());
          if (index < 0) index += size;
          if (index >= 0 && index < size) {
            std::string character;
            AppendCodePoint(characters[static_cast<size_t>(index)], &character);
            return StringLike(object, std::move(character));
          }
        }
        return Value::Undefined(absl::StrCat(ObjectDescription(object), " has no element ", key.AsInt()));
      }
      break;
    case Value::Kind::kNamespace:
      if (key.is_string()) return GetAttribute(object, key.string_value());
      break;
    default:
      break;
  }
  if (key.is_string()) return GetAttribute(object, key.string_value());
  return Value::Undefined(absl::StrCat(ObjectDescription(object), " has no element ", ToPythonRepr(key)));
}

absl::StatusOr<Value> Interpreter::EvalSlice(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  ASSIGN_OR_RETURN(Value object, Eval(*expr.children[0], scope));
  Value parts[3];
  for (int i = 0; i < 3; ++i) {
    if (expr.children[static_cast<size_t>(i) + 1] != nullptr) {
      ASSIGN_OR_RETURN(parts[i], Eval(*expr.children[static_cast<size_t>(i) + 1], scope));
    } else {
      parts[i] = Value::None();
    }
  }
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_list()) {
    const auto& items = object.list().items;
    ASSIGN_OR_RETURN(std::vector<size_t> indices,
                     SliceIndices(&parts[0], &parts[1], &parts[2], static_cast<int64_t>(items.size())));
    std::vector<Value> sliced;
    sliced.reserve(indices.size());
    for (size_t index : indices) sliced.push_back(items[index]);
    return object.list().is_tuple ? Value::Tuple(std::move(sliced)) : Value::List(std::move(sliced));
  }
  if (object.is_string()) {
    const std::vector<char32_t> characters = DecodeAll(object.string_value());
    ASSIGN_OR_RETURN(std::vector<size_t> indices,
                     SliceIndices(&parts[0], &parts[1], &parts[2], static_cast<int64_t>(characters.size())));
    std::string sliced;
    for (size_t index : indices) AppendCodePoint(characters[index], &sliced);
    return StringLike(object, std::move(sliced));
  }
  // jinja2 compiles a slice to a plain Python subscript, so slicing anything else is a TypeError.
  return absl::InvalidArgumentError(absl::StrCat("'", TypeName(object), "' object is not subscriptable"));
}

void Interpreter::AddBuiltins(Scope* scope) {
  for (const char* name : {"range", "dict", "namespace", "raise_exception", "strftime_now"}) {
    auto function = std::make_shared<Callable>();
    function->type = Callable::Type::kBuiltin;
    function->name = name;
    scope->Set(name, Value::Function(std::move(function)));
  }
}

absl::StatusOr<Value> Interpreter::CallBuiltin(const Callable& function, const CallArguments& arguments) {
  if (function.type == Callable::Type::kBoundMethod) {
    return CallMethod(*this, function.self, function.name, arguments);
  }
  const std::string& name = function.name;
  if (name == "raise_exception") {
    const Value* message = arguments.Get(0, "message");
    absl::Status raised = absl::InvalidArgumentError(message == nullptr ? "" : ToPythonString(*message));
    raised.SetPayload(kRaisedByTemplatePayload, absl::Cord("1"));
    return raised;
  }
  if (name == "range") {
    int64_t bounds[3] = {0, 0, 1};
    const size_t count = arguments.positional.size();
    if (count < 1 || count > 3 || !arguments.keywords.empty()) {
      return absl::InvalidArgumentError("range expected 1 to 3 integer arguments");
    }
    for (size_t i = 0; i < count; ++i) {
      const Value& bound = arguments.positional[i];
      if (!bound.is_int() && !bound.is_bool()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", TypeName(bound), "' object cannot be interpreted as an integer"));
      }
    }
    if (count == 1) {
      bounds[1] = arguments.positional[0].AsInt();
    } else {
      bounds[0] = arguments.positional[0].AsInt();
      bounds[1] = arguments.positional[1].AsInt();
      if (count == 3) bounds[2] = arguments.positional[2].AsInt();
    }
    if (bounds[2] == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
    std::vector<Value> items;
    // jinja2's sandbox refuses ranges of more than 100000 items.
    constexpr size_t kMaxRange = 100000;
    for (int64_t i = bounds[0]; bounds[2] > 0 ? i < bounds[1] : i > bounds[1]; i += bounds[2]) {
      if (items.size() >= kMaxRange) {
        return absl::InvalidArgumentError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      }
      items.push_back(Value::Int(i));
      if ((bounds[2] > 0 && i > std::numeric_limits<int64_t>::max() - bounds[2]) ||
          (bounds[2] < 0 && i < std::numeric_limits<int64_t>::min() - bounds[2])) {
        break;
      }
    }
    RETURN_IF_ERROR(budget_.Build(items.size() * sizeof(Value)));
    return Value::List(std::move(items));
  }
  if (name == "dict" || name == "namespace") {
    DictData dict;
    if (arguments.positional.size() > 1)
      return absl::InvalidArgumentError(absl::StrCat(name, " expected at most 1 argument"));
    if (arguments.positional.size() == 1) {
      const Value& initial = arguments.positional[0];
      if (initial.is_dict()) {
        dict = initial.dict();
      } else {
        ASSIGN_OR_RETURN(std::vector<Value> pairs, IterateValue(initial));
        for (const Value& pair : pairs) {
          if (!pair.is_list() || pair.list().items.size() != 2) {
            return absl::InvalidArgumentError("dictionary update sequence element has wrong length");
          }
          dict.Set(pair.list().items[0], pair.list().items[1]);
        }
      }
    }
    for (const auto& [key, value] : arguments.keywords) dict.Set(Value::String(key), value);
    if (name == "dict") return Value::Dict(std::move(dict));
    Value object = Value::Namespace();
    for (auto& [key, value] : dict.entries) {
      if (!key.is_string()) return absl::InvalidArgumentError("namespace attribute names must be strings");
      if (value.holds_namespace()) return absl::InvalidArgumentError("a namespace attribute cannot hold a namespace");
      object.namespace_data().Set(key.string_value(), value);
    }
    return object;
  }
  if (name == "strftime_now") {
    const Value* format = arguments.Get(0, "format");
    if (format == nullptr || !format->is_string())
      return absl::InvalidArgumentError("strftime_now expects a format string");
    return Value::String(absl::FormatTime(format->string_value(), now_, time_zone_));
  }
  if (name == "loop.cycle") {
    if (arguments.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
    const size_t index = static_cast<size_t>(function.self.AsInt()) % arguments.positional.size();
    return arguments.positional[index];
  }
  return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not callable"));
}

}  // namespace llmc::jinja
