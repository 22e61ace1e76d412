#include "worker/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "worker/jinja/callable.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {

const Value* DictData::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::FindString(absl::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.string_value() == key) return &v;
  }
  return nullptr;
}

void DictData::Set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (Equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* NamespaceData::Find(absl::string_view name) const {
  for (const auto& [k, v] : attributes) {
    if (k == name) return &v;
  }
  return nullptr;
}

void NamespaceData::Set(const std::string& name, Value value) {
  for (auto& [k, v] : attributes) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attributes.emplace_back(name, std::move(value));
}

Value Value::Undefined(std::string hint) {
  return Value(Kind::kUndefined, std::make_shared<const std::string>(std::move(hint)));
}
Value Value::None() { return Value(Kind::kNone, std::monostate()); }
Value Value::Bool(bool value) { return Value(Kind::kBool, value); }
Value Value::Int(int64_t value) { return Value(Kind::kInt, value); }
Value Value::Float(double value) { return Value(Kind::kFloat, value); }
Value Value::String(std::string value) {
  return Value(Kind::kString, std::make_shared<const std::string>(std::move(value)));
}

Value Value::Markup(std::string value) {
  Value markup = String(std::move(value));
  markup.markup_ = true;
  return markup;
}

Value StringLike(const Value& source, std::string text) {
  return source.is_markup() ? Value::Markup(std::move(text)) : Value::String(std::move(text));
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

Value EscapeToMarkup(const Value& value) {
  if (value.is_markup()) return value;
  return Value::Markup(HtmlEscape(ToPythonString(value)));
}

Value Value::List(std::vector<Value> items) { return MakeList(std::move(items), /*is_tuple=*/false); }
Value Value::Tuple(std::vector<Value> items) { return MakeList(std::move(items), /*is_tuple=*/true); }

Value Value::MakeList(std::vector<Value> items, bool is_tuple) {
  int depth = 0;
  bool holds_namespace = false;
  for (const Value& item : items) {
    depth = std::max(depth, item.depth_);
    holds_namespace = holds_namespace || item.holds_namespace_;
  }
  Value value(Kind::kList, std::make_shared<const ListData>(ListData{std::move(items), is_tuple}));
  value.depth_ = depth + 1;
  value.holds_namespace_ = holds_namespace;
  return value;
}

Value Value::Dict(DictData dict) {
  int depth = 0;
  bool holds_namespace = false;
  for (const auto& [k, v] : dict.entries) {
    depth = std::max({depth, k.depth_, v.depth_});
    holds_namespace = holds_namespace || v.holds_namespace_;
  }
  Value value(Kind::kDict, std::make_shared<const DictData>(std::move(dict)));
  value.depth_ = depth + 1;
  value.holds_namespace_ = holds_namespace;
  return value;
}

Value Value::Namespace() {
  Value value(Kind::kNamespace, std::make_shared<NamespaceData>());
  value.depth_ = 1;
  value.holds_namespace_ = true;
  return value;
}

Value Value::Function(std::shared_ptr<const Callable> callable) { return Value(Kind::kCallable, std::move(callable)); }

std::string Value::undefined_hint() const {
  if (const auto* hint = std::get_if<std::shared_ptr<const std::string>>(&data_)) return **hint;
  return "value is undefined";
}

bool IsTruthy(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return value.bool_value();
    case Value::Kind::kInt:
      return value.int_value() != 0;
    case Value::Kind::kFloat:
      return value.float_value() != 0.0;
    case Value::Kind::kString:
      return !value.string_value().empty();
    case Value::Kind::kList:
      return !value.list().items.empty();
    case Value::Kind::kDict:
      return !value.dict().entries.empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
      return true;
  }
  return false;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.string_value() == b.string_value();
    case Value::Kind::kList: {
      const ListData& x = a.list();
      const ListData& y = b.list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.dict();
      const DictData& y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.Find(k);
        if (other == nullptr || !Equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.namespace_data() == &b.namespace_data();
    case Value::Kind::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

std::string TypeName(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return value.is_markup() ? "Markup" : "str";
    case Value::Kind::kList:
      return value.list().is_tuple ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kCallable:
      return value.callable().type == Callable::Type::kMacro ? "Macro" : "function";
  }
  return "object";
}

std::string FormatFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest digits that read back as `value`, laid out as Python's repr does: positional notation
  // for exponents in [-4, 16), scientific otherwise.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);
  const size_t e = scientific.find('e');
  std::string mantissa = scientific.substr(0, e);
  const int exponent = std::stoi(scientific.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out =
          digits.substr(0, static_cast<size_t>(exponent) + 1) + "." + digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return sign + out;
  }
  std::string out = sign + digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof(exponent_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exponent_text;
}

namespace {

void AppendStringRepr(absl::string_view text, std::string* out) {
  const bool has_single = text.find('\'') != absl::string_view::npos;
  const bool has_double = text.find('"') != absl::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out->push_back(quote);
  size_t position = 0;
  while (position < text.size()) {
    const char32_t c = DecodeCodePoint(text, &position);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (!IsPythonPrintable(c)) {
      char escape[16];
      if (c < 0x100) {
        std::snprintf(escape, sizeof(escape), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(escape, sizeof(escape), "\\U%08x", static_cast<unsigned>(c));
      }
      out->append(escape);
    } else {
      AppendCodePoint(c, out);
    }
  }
  out->push_back(quote);
}

}  // namespace

void AppendPythonRepr(const Value& value, std::string* out) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      out->append("Undefined");
      return;
    case Value::Kind::kString:
      if (value.is_markup()) out->append("Markup(");
      AppendStringRepr(value.string_value(), out);
      if (value.is_markup()) out->push_back(')');
      return;
    case Value::Kind::kList: {
      const ListData& list = value.list();
      out->push_back(list.is_tuple ? '(' : '[');
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) out->append(", ");
        AppendPythonRepr(list.items[i], out);
      }
      if (list.is_tuple && list.items.size() == 1) out->push_back(',');
      out->push_back(list.is_tuple ? ')' : ']');
      return;
    }
    case Value::Kind::kDict: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, v] : value.dict().entries) {
        if (!first) out->append(", ");
        first = false;
        AppendPythonRepr(k, out);
        out->append(": ");
        AppendPythonRepr(v, out);
      }
      out->push_back('}');
      return;
    }
    case Value::Kind::kNamespace: {
      out->append("<Namespace {");
      bool first = true;
      for (const auto& [k, v] : value.namespace_data().attributes) {
        if (!first) out->append(", ");
        first = false;
        AppendStringRepr(k, out);
        out->append(": ");
        AppendPythonRepr(v, out);
      }
      out->append("}>");
      return;
    }
    default:
      out->append(ToPythonString(value));
  }
}

std::string ToPythonRepr(const Value& value) {
  std::string out;
  AppendPythonRepr(value, &out);
  return out;
}

std::string ToPythonString(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return value.bool_value() ? "True" : "False";
    case Value::Kind::kInt:
      return absl::StrCat(value.int_value());
    case Value::Kind::kFloat:
      return FormatFloat(value.float_value());
    case Value::Kind::kString:
      return value.string_value();
    case Value::Kind::kCallable:
      return value.callable().type == Callable::Type::kMacro
                 ? absl::StrCat("<Macro '", value.callable().name, "'>")
                 : absl::StrCat("<built-in function ", value.callable().name, ">");
    default:
      return ToPythonRepr(value);
  }
}

}  // namespace llmc::jinja
