// allOf as one schema, $ref resolution, and the disjointness proof that lets oneOf compile as anyOf.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "worker/grammar/json_schema_internal.h"

namespace llmc::grammar::json_schema {
namespace {

constexpr int kMaxMergeDepth = 64;

absl::StatusOr<std::string> PercentDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int value = 0;
    if (i + 2 >= text.size()) return absl::InvalidArgumentError("bad escape");
    for (size_t k = i + 1; k <= i + 2; ++k) {
      const char c = text[k];
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      if (digit < 0) return absl::InvalidArgumentError("bad escape");
      value = value * 16 + digit;
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

// allOf of two schemas, without building one where it is not needed.
Json AllOf2(const Json& a, const Json& b) {
  if (a.is_boolean() && a.get<bool>()) return b;
  if (b.is_boolean() && b.get<bool>()) return a;
  if ((a.is_boolean() && !a.get<bool>()) || (b.is_boolean() && !b.get<bool>())) return Json(false);
  if (a == b) return a;
  Json both = Json::object();
  both["allOf"] = Json::array({a, b});
  return both;
}

std::vector<Json> EnumValues(const Json& schema) {
  if (schema.contains("const")) return {schema.at("const")};
  if (schema.contains("enum") && schema.at("enum").is_array()) {
    return std::vector<Json>(schema.at("enum").begin(), schema.at("enum").end());
  }
  return {};
}

Json TypeNames(uint32_t types) {
  Json names = Json::array();
  if (types & kNullBit) names.push_back("null");
  if (types & kBooleanBit) names.push_back("boolean");
  if (types & kObjectBit) names.push_back("object");
  if (types & kArrayBit) names.push_back("array");
  if (types & kStringBit) names.push_back("string");
  // A merge never leaves fractional numbers without integers: "number" narrows to "integer" only.
  if (types & kFractionalBit) {
    names.push_back("number");
  } else if (types & kIntegerBit) {
    names.push_back("integer");
  }
  return names;
}

bool IsLowerBound(absl::string_view key) {
  return key == "minimum" || key == "exclusiveMinimum" || key == "minLength" || key == "minItems" ||
         key == "minProperties";
}

bool IsUpperBound(absl::string_view key) {
  return key == "maximum" || key == "exclusiveMaximum" || key == "maxLength" || key == "maxItems" ||
         key == "maxProperties";
}

}  // namespace

absl::StatusOr<const Json*> SchemaCompiler::ResolveRef(const Json& ref, absl::string_view pointer,
                                                       std::string* target_pointer) {
  if (!ref.is_string()) return InvalidValue("$ref", pointer, "not a string");
  const std::string text = ref.get<std::string>();
  if (text.empty() || text[0] != '#') {
    return Unsupported("$ref", pointer,
                       absl::StrCat("only references within the document are supported, not '", text, "'"));
  }
  absl::StatusOr<std::string> fragment = PercentDecode(absl::string_view(text).substr(1));
  if (!fragment.ok()) return InvalidValue("$ref", pointer, absl::StrCat("bad percent escape in '", text, "'"));
  target_pointer->clear();
  const Json* node = &root_;
  if (fragment->empty()) return node;
  if ((*fragment)[0] != '/') return Unsupported("$ref", pointer, absl::StrCat("anchor references ('", text, "')"));
  for (absl::string_view raw : absl::StrSplit(absl::string_view(*fragment).substr(1), '/')) {
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        token += raw[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += raw[i];
      }
    }
    size_t index = 0;
    if (node->is_object() && node->contains(token)) {
      node = &node->at(token);
    } else if (node->is_array() && absl::SimpleAtoi(token, &index) && index < node->size()) {
      node = &node->at(index);
    } else {
      return InvalidValue("$ref", pointer, absl::StrCat("'", text, "' points at nothing"));
    }
    *target_pointer = PointerAppend(*target_pointer, token);
  }
  return node;
}

absl::StatusOr<Json> SchemaCompiler::MergeAll(const std::vector<Json>& schemas, const std::string& pointer, int depth) {
  const char* keyword = schemas.size() == 1 && !schemas[0].contains("allOf") ? "$ref" : "allOf";
  if (depth > kMaxMergeDepth) return Unsupported(keyword, pointer, "nested or recursive too deeply");
  // The parts to merge, in order: $ref targets and allOf branches expanded. `base` parts are the schemas
  // themselves (their unevaluatedProperties sees the branches' properties); the others are branches.
  std::vector<std::pair<Json, bool>> parts;
  std::vector<std::pair<Json, bool>> pending;
  for (auto it = schemas.rbegin(); it != schemas.rend(); ++it) pending.emplace_back(*it, it == schemas.rend() - 1);
  int expansions = 0;
  while (!pending.empty()) {
    auto [schema, base] = std::move(pending.back());
    pending.pop_back();
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) return Json(false);
      continue;
    }
    if (!schema.is_object()) return InvalidValue("allOf", pointer, "a branch is not a schema");
    RETURN_IF_ERROR(CheckKeywords(schema, pointer));
    if (++expansions > 256) return Unsupported(keyword, pointer, "too many schemas to merge (recursive?)");
    if (schema.contains("$ref") || schema.contains("allOf")) {
      std::vector<std::pair<Json, bool>> expanded;
      if (schema.contains("$ref")) {
        std::string target_pointer;
        ASSIGN_OR_RETURN(const Json* target, ResolveRef(schema.at("$ref"), pointer, &target_pointer));
        expanded.emplace_back(*target, false);
        schema.erase("$ref");
      }
      if (schema.contains("allOf")) {
        const Json all_of = schema.at("allOf");
        if (!all_of.is_array() || all_of.empty()) return InvalidValue("allOf", pointer, "not a non-empty array");
        schema.erase("allOf");
        expanded.emplace_back(std::move(schema), base);
        for (const Json& branch : all_of) expanded.emplace_back(branch, false);
      } else {
        expanded.emplace_back(std::move(schema), base);
      }
      for (auto it = expanded.rbegin(); it != expanded.rend(); ++it) pending.push_back(std::move(*it));
      continue;
    }
    parts.emplace_back(std::move(schema), base);
  }

  Json merged = Json::object();
  for (auto& [part, base] : parts) {
    if (part.contains("oneOf")) {
      // Proven disjoint, oneOf is anyOf; with an anyOf beside it, the two lists' cross product.
      Json one_of = part.at("oneOf");
      part.erase("oneOf");
      ASSIGN_OR_RETURN(uint32_t context_types, PossibleTypes(part, pointer, depth + 1));
      RETURN_IF_ERROR(CheckOneOfDisjoint(one_of, PointerAppend(pointer, "oneOf"), depth + 1, context_types));
      if (part.contains("anyOf")) {
        const Json& any_of = part.at("anyOf");
        if (!any_of.is_array() || any_of.size() * one_of.size() > kMaxSchemaBranches) {
          return Unsupported("oneOf", pointer, "too many combinations with anyOf");
        }
        Json product = Json::array();
        for (const Json& a : any_of) {
          for (const Json& b : one_of) product.push_back(AllOf2(a, b));
        }
        part["anyOf"] = std::move(product);
      } else {
        part["anyOf"] = std::move(one_of);
      }
    }
    if (!base && part.contains("unevaluatedProperties")) {
      // A branch's own unevaluatedProperties sees only the branch: without applicators left in it, that is
      // additionalProperties.
      if (part.contains("anyOf")) return Unsupported("unevaluatedProperties", pointer, "inside an allOf branch");
      if (!part.contains("additionalProperties")) part["additionalProperties"] = part.at("unevaluatedProperties");
      part.erase("unevaluatedProperties");
    }
    if (merged.empty()) {
      merged = std::move(part);
      continue;
    }
    // Properties and additionalProperties first: a property one side lists and the other does not must
    // satisfy the other's additionalProperties.
    const bool objects = part.contains("properties") || part.contains("additionalProperties") ||
                         merged.contains("properties") || merged.contains("additionalProperties");
    if (objects) {
      if (part.contains("patternProperties") || merged.contains("patternProperties")) {
        return Unsupported("patternProperties", pointer, "merged in an allOf");
      }
      const Json empty = Json::object();
      const Json& a_props = merged.contains("properties") ? merged.at("properties") : empty;
      const Json& b_props = part.contains("properties") ? part.at("properties") : empty;
      if (!a_props.is_object() || !b_props.is_object()) return InvalidValue("properties", pointer, "not an object");
      const bool a_add = merged.contains("additionalProperties");
      const bool b_add = part.contains("additionalProperties");
      Json properties = Json::object();
      for (const auto& [key, value] : a_props.items()) {
        const Json other = b_props.contains(key) ? b_props.at(key)
                           : b_add               ? part.at("additionalProperties")
                                                 : Json(true);
        properties[key] = AllOf2(value, other);
      }
      for (const auto& [key, value] : b_props.items()) {
        if (a_props.contains(key)) continue;
        properties[key] = AllOf2(a_add ? merged.at("additionalProperties") : Json(true), value);
      }
      if (a_add && b_add) {
        merged["additionalProperties"] = AllOf2(merged.at("additionalProperties"), part.at("additionalProperties"));
      } else if (b_add) {
        merged["additionalProperties"] = part.at("additionalProperties");
      }
      if (!properties.empty()) merged["properties"] = std::move(properties);
      part.erase("properties");
      part.erase("additionalProperties");
    }
    // Likewise items: a position one side's prefixItems covers and the other's does not falls under the
    // other's items.
    if (part.contains("prefixItems") || merged.contains("prefixItems")) {
      const Json none = Json::array();
      const Json& a_prefix = merged.contains("prefixItems") ? merged.at("prefixItems") : none;
      const Json& b_prefix = part.contains("prefixItems") ? part.at("prefixItems") : none;
      if (!a_prefix.is_array() || !b_prefix.is_array()) return InvalidValue("prefixItems", pointer, "not an array");
      const Json a_items = merged.contains("items") ? merged.at("items") : Json(true);
      const Json b_items = part.contains("items") ? part.at("items") : Json(true);
      Json prefix = Json::array();
      for (size_t i = 0; i < std::max(a_prefix.size(), b_prefix.size()); ++i) {
        prefix.push_back(
            AllOf2(i < a_prefix.size() ? a_prefix[i] : a_items, i < b_prefix.size() ? b_prefix[i] : b_items));
      }
      merged["prefixItems"] = std::move(prefix);
      if (merged.contains("items") || part.contains("items")) merged["items"] = AllOf2(a_items, b_items);
      part.erase("prefixItems");
      part.erase("items");
    }
    for (const auto& [key, value] : part.items()) {
      if (!merged.contains(key)) {
        merged[key] = value;
        continue;
      }
      Json& current = merged.at(key);
      if (IsMetadataKeyword(key) || current == value) continue;
      if (key == "type") {
        ASSIGN_OR_RETURN(uint32_t a, DeclaredTypes(merged, pointer));
        ASSIGN_OR_RETURN(uint32_t b, DeclaredTypes(part, pointer));
        current = TypeNames(a & b);
      } else if (key == "required") {
        if (!value.is_array() || !current.is_array()) return InvalidValue("required", pointer, "not an array");
        for (const Json& name : value) {
          if (std::find(current.begin(), current.end(), name) == current.end()) current.push_back(name);
        }
      } else if (IsLowerBound(key)) {
        if (!value.is_number() || !current.is_number()) return InvalidValue(key, pointer, "not a number");
        if (current < value) current = value;
      } else if (IsUpperBound(key)) {
        if (!value.is_number() || !current.is_number()) return InvalidValue(key, pointer, "not a number");
        if (value < current) current = value;
      } else if (key == "enum" || key == "const") {
        // Reconciled after the loop.
      } else if (key == "items" || key == "propertyNames" || key == "unevaluatedProperties") {
        current = AllOf2(current, value);
      } else if (key == "anyOf") {
        if (!value.is_array() || !current.is_array()) return InvalidValue("anyOf", pointer, "not an array");
        if (value.size() * current.size() > kMaxSchemaBranches) {
          return Unsupported("anyOf", pointer, "too many combinations in an allOf");
        }
        Json product = Json::array();
        for (const Json& a : current) {
          for (const Json& b : value) product.push_back(AllOf2(a, b));
        }
        current = std::move(product);
      } else {
        return Unsupported(key, pointer, "different values in an allOf");
      }
    }
    if ((merged.contains("enum") || merged.contains("const")) && (part.contains("enum") || part.contains("const"))) {
      // Both sides list values: the values both allow.
      std::vector<Json> a = EnumValues(merged);
      std::vector<Json> b = EnumValues(part);
      Json common = Json::array();
      for (const Json& value : a) {
        if (std::find(b.begin(), b.end(), value) != b.end()) common.push_back(value);
      }
      merged.erase("const");
      merged["enum"] = std::move(common);
    }
  }
  return merged;
}

absl::StatusOr<uint32_t> SchemaCompiler::PossibleTypes(const Json& schema, absl::string_view pointer, int depth) {
  if (schema.is_boolean()) return schema.get<bool>() ? static_cast<uint32_t>(kAllTypes) : 0u;
  if (!schema.is_object() || depth > kMaxMergeDepth) return kAllTypes;
  ASSIGN_OR_RETURN(uint32_t types, DeclaredTypes(schema, pointer));
  if (schema.contains("const")) types &= TypeOfValue(schema.at("const"));
  if (schema.contains("enum")) {
    uint32_t listed = 0;
    for (const Json& value : EnumValues(schema)) listed |= TypeOfValue(value);
    types &= listed;
  }
  if (schema.contains("$ref")) {
    std::string target_pointer;
    ASSIGN_OR_RETURN(const Json* target, ResolveRef(schema.at("$ref"), pointer, &target_pointer));
    // Once per definition; a cycle sees all types (which can only refuse more).
    const auto [known, inserted] = ref_types_.emplace(target_pointer, kAllTypes);
    if (inserted) {
      ASSIGN_OR_RETURN(uint32_t target_types, PossibleTypes(*target, target_pointer, depth + 1));
      ref_types_[target_pointer] = target_types;
      types &= target_types;
    } else {
      types &= known->second;
    }
  }
  for (const char* keyword : {"allOf", "anyOf", "oneOf"}) {
    if (!schema.contains(keyword) || !schema.at(keyword).is_array()) continue;
    uint32_t combined = std::string(keyword) == "allOf" ? static_cast<uint32_t>(kAllTypes) : 0u;
    for (const Json& branch : schema.at(keyword)) {
      ASSIGN_OR_RETURN(uint32_t branch_types, PossibleTypes(branch, pointer, depth + 1));
      combined = std::string(keyword) == "allOf" ? combined & branch_types : combined | branch_types;
    }
    types &= combined;
  }
  return types;
}

absl::Status SchemaCompiler::CheckOneOfDisjoint(const Json& branches, const std::string& pointer, int depth,
                                                uint32_t context_types) {
  if (!branches.is_array() || branches.empty()) return InvalidValue("oneOf", pointer, "not a non-empty array");
  std::vector<uint32_t> types;
  std::vector<Json> flattened;  // allOf and $ref merged away: where a discriminating property shows
  for (const Json& branch : branches) {
    ASSIGN_OR_RETURN(uint32_t branch_types, PossibleTypes(branch, pointer, depth + 1));
    types.push_back(branch_types);
    absl::StatusOr<Json> flat = MergeAll({branch}, pointer, depth + 1);
    flattened.push_back(flat.ok() ? *std::move(flat) : Json::object());
  }
  const auto values_of = [&](const Json& schema, const std::string& name) -> std::vector<Json> {
    if (!schema.is_object() || !schema.contains("properties") || !schema.at("properties").contains(name)) return {};
    absl::StatusOr<Json> property = MergeAll({schema.at("properties").at(name)}, pointer, depth + 1);
    return property.ok() && property->is_object() ? EnumValues(*property) : std::vector<Json>{};
  };
  // An object with a member named `name` never matches `schema`: closed, and not listing it.
  const auto excludes = [&](const Json& schema, const std::string& name) {
    if (!schema.is_object() || schema.contains("patternProperties")) return false;
    if (schema.contains("properties") && schema.at("properties").is_object() &&
        schema.at("properties").contains(name)) {
      return schema.at("properties").at(name) == Json(false);
    }
    for (const char* keyword : {"additionalProperties", "unevaluatedProperties"}) {
      if (schema.contains(keyword)) return schema.at(keyword) == Json(false);
    }
    return options_.strict && (schema.contains("type") || schema.contains("properties"));
  };
  // Two object branches are disjoint when a property one requires is one the other excludes, or takes
  // values from two lists with nothing in common.
  const auto discriminated = [&](const Json& a, const Json& b) {
    for (const Json* side : {&a, &b}) {
      const Json& other = side == &a ? b : a;
      if (!side->is_object() || !side->contains("required") || !side->at("required").is_array()) continue;
      for (const Json& name : side->at("required")) {
        if (!name.is_string()) continue;
        if (excludes(other, name.get<std::string>())) return true;
        const std::vector<Json> a_values = values_of(*side, name.get<std::string>());
        const std::vector<Json> b_values = values_of(other, name.get<std::string>());
        if (a_values.empty() || b_values.empty()) continue;
        bool overlap = false;
        for (const Json& value : a_values) {
          overlap |= std::find(b_values.begin(), b_values.end(), value) != b_values.end();
        }
        if (!overlap) return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < types.size(); ++i) {
    for (size_t j = i + 1; j < types.size(); ++j) {
      const uint32_t common = types[i] & types[j] & context_types;
      if (common == 0) continue;
      if (common == kObjectBit && discriminated(flattened[i], flattened[j])) continue;
      return Unsupported("oneOf", pointer,
                         absl::StrCat("branches ", i, " and ", j,
                                      " are not provably disjoint (oneOf needs exactly "
                                      "one to match; give them different types or a required property with "
                                      "different const/enum values)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace llmc::grammar::json_schema
