#ifndef LLMC_WORKER_JINJA_VALUE_H_
#define LLMC_WORKER_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"

namespace llmc::jinja {

class Value;
struct Callable;  // defined by the interpreter (callable.h)

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
};

// Python's dict: insertion-ordered, keys compared with Python's ==.
struct DictData {
  std::vector<std::pair<Value, Value>> entries;

  const Value* Find(const Value& key) const;
  const Value* FindString(absl::string_view key) const;
  // Replaces the value of an existing key or appends the pair.
  void Set(Value key, Value value);
};

// The mutable object that `namespace()` creates; the only value a template can change in place.
struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attributes;

  const Value* Find(absl::string_view name) const;
  void Set(const std::string& name, Value value);
};

// A template value with Python's data model: undefined (jinja2's Undefined), None, bool, int, float, str,
// list/tuple, dict, namespace and callables. Strings, lists and dicts are immutable and shared; copying a
// Value is cheap. Values belong to one render and are never shared between threads.
class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() = default;  // undefined
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool value);
  static Value Int(int64_t value);
  static Value Float(double value);
  static Value String(std::string value);
  // markupsafe's Markup, which the `safe` and `escape` filters return: a str marked as already escaped. It
  // prints as its text, but `+` escapes a plain str joined to it and most of its str methods return Markup
  // (with their string arguments escaped), as jinja2 behaves with autoescape off (transformers' setting).
  static Value Markup(std::string value);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value Dict(DictData dict);
  static Value Namespace();
  static Value Function(std::shared_ptr<const Callable> callable);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // bool counts as a number, as in Python.
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return markup_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool bool_value() const { return std::get<bool>(data_); }
  int64_t int_value() const { return std::get<int64_t>(data_); }
  double float_value() const { return std::get<double>(data_); }
  // For a bool or int: its integer value.
  int64_t AsInt() const { return is_bool() ? (bool_value() ? 1 : 0) : int_value(); }
  // For any number.
  double AsDouble() const { return is_float() ? float_value() : static_cast<double>(AsInt()); }
  const std::string& string_value() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const ListData& list() const { return *std::get<std::shared_ptr<const ListData>>(data_); }
  const DictData& dict() const { return *std::get<std::shared_ptr<const DictData>>(data_); }
  NamespaceData& namespace_data() const { return *std::get<std::shared_ptr<NamespaceData>>(data_); }
  const Callable& callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  // Why a value is undefined ("'x' is undefined"), for the error when it is used.
  std::string undefined_hint() const;

  // Nesting of lists, dicts and namespaces inside this value (0 for scalars).
  int depth() const { return depth_; }
  bool holds_namespace() const { return holds_namespace_; }

 private:
  using Data = std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
                            std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                            std::shared_ptr<NamespaceData>, std::shared_ptr<const Callable>>;
  Value(Kind kind, Data data) : kind_(kind), data_(std::move(data)) {}
  static Value MakeList(std::vector<Value> items, bool is_tuple);

  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  bool holds_namespace_ = false;
  int depth_ = 0;
  Data data_;
};

// A string made from `source`: Markup when `source` is, as markupsafe's methods return.
Value StringLike(const Value& source, std::string text);
// markupsafe's escape of a text: & < > " ' as entities.
std::string HtmlEscape(absl::string_view text);
// markupsafe's escape(): Markup stays as it is; anything else is printed and escaped, as Markup.
Value EscapeToMarkup(const Value& value);

// Python's truthiness.
bool IsTruthy(const Value& value);
// Python's ==: numbers across bool/int/float, containers element-wise; undefined equals undefined.
bool Equals(const Value& a, const Value& b);
// Python's type name, for error messages ("str", "int", "dict", ...).
std::string TypeName(const Value& value);

// Python's repr() of a float ("1.0", "1e+20", "inf").
std::string FormatFloat(double value);
// Python's str(): what {{ value }} prints. Undefined prints as "".
std::string ToPythonString(const Value& value);
// Python's repr(), which str() of a list or dict uses for the items.
std::string ToPythonRepr(const Value& value);
void AppendPythonRepr(const Value& value, std::string* out);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_VALUE_H_
