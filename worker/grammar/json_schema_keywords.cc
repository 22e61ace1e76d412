// The JSON Schema compiler's shared pieces: keyword sets, types, errors and locations, expression helpers.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "worker/grammar/json_schema_internal.h"

namespace llmc::grammar::json_schema {
namespace {

template <size_t N>
bool Contains(const absl::string_view (&set)[N], absl::string_view key) {
  return std::find(std::begin(set), std::end(set), key) != std::end(set);
}

constexpr absl::string_view kMetadataKeywords[] = {"description", "title",     "$schema", "$id",
                                                   "$comment",    "examples",  "default", "deprecated",
                                                   "readOnly",    "writeOnly", "$defs",   "definitions"};
constexpr absl::string_view kApplicatorKeywords[] = {"type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf"};
constexpr absl::string_view kObjectKeywords[] = {
    "properties",    "required",          "additionalProperties", "minProperties",
    "maxProperties", "patternProperties", "propertyNames",        "unevaluatedProperties"};
constexpr absl::string_view kArrayKeywords[] = {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"};
constexpr absl::string_view kStringKeywords[] = {"minLength", "maxLength", "pattern", "format"};
constexpr absl::string_view kNumberKeywords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                 "multipleOf"};

// A cast to an integer type would be undefined for 1e26; JSON Schema calls any whole number an integer.
bool IsWholeNumber(double number) { return std::isfinite(number) && number == std::trunc(number); }

}  // namespace

bool IsObjectKeyword(absl::string_view keyword) { return Contains(kObjectKeywords, keyword); }

bool IsArrayKeyword(absl::string_view keyword) { return Contains(kArrayKeywords, keyword); }

// ---- Expressions ----

bool IsNothing(const Expr& expr) { return expr.kind == Expr::Kind::kCharClass && expr.ranges.empty(); }

Expr Seq(std::vector<Expr> children) {
  for (const Expr& child : children) {
    if (IsNothing(child)) return Expr::Nothing();
  }
  return Expr::Sequence(std::move(children));
}

Expr Alt(std::vector<Expr> children) {
  std::vector<Expr> kept;
  for (Expr& child : children) {
    if (!IsNothing(child)) kept.push_back(std::move(child));
  }
  return Expr::Choice(std::move(kept));
}

Expr Lit(absl::string_view bytes) { return Expr::Literal(bytes); }

Expr Chars(absl::string_view members) {
  std::vector<CodePointRange> ranges;
  for (const char c : members) ranges.push_back({static_cast<uint32_t>(c), static_cast<uint32_t>(c)});
  return Expr::CharClass(std::move(ranges));
}

Expr Range(char first, char last) {
  return Expr::CharClass({{static_cast<uint32_t>(first), static_cast<uint32_t>(last)}});
}

Expr Digit() { return Range('0', '9'); }

Expr HexDigit() { return Expr::CharClass({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); }

// ---- Errors and locations ----

std::string PointerAppend(absl::string_view pointer, absl::string_view token) {
  return absl::StrCat(pointer, "/", absl::StrReplaceAll(token, {{"~", "~0"}, {"/", "~1"}}));
}

std::string PointerAppend(absl::string_view pointer, size_t index) { return absl::StrCat(pointer, "/", index); }

std::string DisplayPointer(absl::string_view pointer) {
  return pointer.empty() ? std::string("the root") : std::string(pointer);
}

absl::Status Unsupported(absl::string_view keyword, absl::string_view pointer, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("unsupported JSON Schema keyword '", keyword, "' at ",
                                                 DisplayPointer(pointer), why.empty() ? "" : ": ", why));
}

absl::Status InvalidValue(absl::string_view keyword, absl::string_view pointer, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid JSON Schema keyword '", keyword, "' at ", DisplayPointer(pointer), ": ", why));
}

absl::StatusOr<uint32_t> CountKeyword(const Json& schema, absl::string_view keyword, absl::string_view pointer) {
  const Json& value = schema.at(std::string(keyword));
  if (value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0)) {
    return static_cast<uint32_t>(std::min<uint64_t>(value.get<uint64_t>(), kUnbounded - 1));
  }
  if (value.is_number_float() && value.get<double>() >= 0 && IsWholeNumber(value.get<double>())) {
    return static_cast<uint32_t>(std::min<double>(value.get<double>(), kUnbounded - 1));
  }
  return InvalidValue(keyword, pointer, "not a non-negative integer");
}

absl::StatusOr<CountBounds> ReadCountBounds(const Json& schema, absl::string_view min_keyword,
                                            absl::string_view max_keyword, absl::string_view pointer) {
  CountBounds bounds;
  if (schema.contains(std::string(min_keyword))) {
    ASSIGN_OR_RETURN(bounds.min, CountKeyword(schema, min_keyword, pointer));
  }
  if (schema.contains(std::string(max_keyword))) {
    ASSIGN_OR_RETURN(bounds.max, CountKeyword(schema, max_keyword, pointer));
  }
  return bounds;
}

// ---- Types and keywords ----

absl::StatusOr<uint32_t> DeclaredTypes(const Json& schema, absl::string_view pointer) {
  if (!schema.contains("type")) return kAllTypes;
  const Json& type = schema.at("type");
  std::vector<Json> names;
  if (type.is_string()) {
    names.push_back(type);
  } else if (type.is_array()) {
    names.assign(type.begin(), type.end());
  } else {
    return InvalidValue("type", pointer, "not a string or an array of strings");
  }
  uint32_t types = 0;
  for (const Json& name : names) {
    const std::string text = name.is_string() ? name.get<std::string>() : "";
    if (text == "null") {
      types |= kNullBit;
    } else if (text == "boolean") {
      types |= kBooleanBit;
    } else if (text == "object") {
      types |= kObjectBit;
    } else if (text == "array") {
      types |= kArrayBit;
    } else if (text == "string") {
      types |= kStringBit;
    } else if (text == "integer") {
      types |= kIntegerBit;
    } else if (text == "number") {
      types |= kIntegerBit | kFractionalBit;
    } else {
      return InvalidValue("type", pointer, absl::StrCat("unknown type ", name.dump()));
    }
  }
  return types;
}

uint32_t TypeOfValue(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return kNullBit;
    case Json::value_t::boolean:
      return kBooleanBit;
    case Json::value_t::object:
      return kObjectBit;
    case Json::value_t::array:
      return kArrayBit;
    case Json::value_t::string:
      return kStringBit;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kIntegerBit;
    case Json::value_t::number_float: {
      return IsWholeNumber(value.get<double>()) ? kIntegerBit : kFractionalBit;
    }
    default:
      return 0;
  }
}

bool IsMetadataKeyword(absl::string_view keyword) { return Contains(kMetadataKeywords, keyword); }

bool IsAssertionKeyword(absl::string_view keyword) { return !IsMetadataKeyword(keyword); }

absl::Status CheckKeywords(const Json& schema, absl::string_view pointer) {
  for (const auto& [key, value] : schema.items()) {
    if (IsMetadataKeyword(key)) continue;
    if (!Contains(kApplicatorKeywords, key) && !IsObjectKeyword(key) && !IsArrayKeyword(key) &&
        !Contains(kStringKeywords, key) && !Contains(kNumberKeywords, key))
      return Unsupported(key, pointer);
    if (key == "uniqueItems") {
      if (!value.is_boolean()) return InvalidValue(key, pointer, "not a boolean");
      if (value.get<bool>()) return Unsupported(key, pointer, "a grammar cannot enforce distinct items");
    }
  }
  return absl::OkStatus();
}

}  // namespace llmc::grammar::json_schema
