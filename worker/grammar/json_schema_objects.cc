// Objects and arrays. Object members come in the order `properties` lists them, then any additional ones;
// commas only between members present.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/grammar/json_schema_internal.h"

namespace llmc::grammar::json_schema {
namespace {

// Past this many optional properties before the first required one, the "rest of the object" expressions
// become rules rather than being copied into every branch.
constexpr size_t kInlineOptionalPrefix = 3;
// Items repeated more times than this are always rule references.
constexpr uint32_t kInlineItemRepeat = 16;

struct Member {
  std::string key;
  Expr value;
  bool required = false;
};

bool ListContains(const Json& list, const std::string& name) {
  return list.is_array() && std::find(list.begin(), list.end(), Json(name)) != list.end();
}

}  // namespace

// Additional keys are spelled by a trie of the listed ones, as deep (in expression and compile time) as the
// longest.
constexpr size_t kMaxPropertyNameBytes = 256;

absl::StatusOr<Expr> SchemaCompiler::CompileObject(const Json& schema, const std::string& pointer, int depth) {
  const Json no_properties = Json::object();
  const Json& properties = schema.contains("properties") ? schema.at("properties") : no_properties;
  if (!properties.is_object()) return InvalidValue("properties", pointer, "not an object");
  const Json no_names = Json::array();
  const Json& required = schema.contains("required") ? schema.at("required") : no_names;
  if (!required.is_array()) return InvalidValue("required", pointer, "not an array");
  for (const Json& name : required) {
    if (!name.is_string()) return InvalidValue("required", pointer, "not an array of strings");
    if (name.get<std::string>().size() > kMaxPropertyNameBytes) {
      return Unsupported("required", pointer, "a property name longer than 256 bytes");
    }
  }
  for (const auto& [name, value] : properties.items()) {
    if (name.size() > kMaxPropertyNameBytes) {
      return Unsupported("properties", pointer, "a property name longer than 256 bytes");
    }
  }
  // OpenAI's strict mode closes objects the schema describes as objects; an untyped schema's object branch
  // keeps JSON Schema's default.
  ASSIGN_OR_RETURN(uint32_t declared, DeclaredTypes(schema, pointer));
  const bool strict_default = options_.strict && (declared != kAllTypes || schema.contains("properties"));
  Json additional = strict_default ? Json(false) : Json(true);
  std::string additional_pointer = PointerAppend(pointer, "additionalProperties");
  if (schema.contains("additionalProperties")) {
    additional = schema.at("additionalProperties");
  } else if (schema.contains("unevaluatedProperties")) {
    // No applicator is left here (allOf is merged, anyOf distributed), so every evaluated property is listed.
    additional = schema.at("unevaluatedProperties");
    additional_pointer = PointerAppend(pointer, "unevaluatedProperties");
  }

  std::vector<Member> members;
  std::vector<std::string> listed;
  for (const auto& [key, subschema] : properties.items()) {
    listed.push_back(key);
    const bool is_required = ListContains(required, key);
    ASSIGN_OR_RETURN(Expr value,
                     CompileValue(subschema, PointerAppend(PointerAppend(pointer, "properties"), key), depth + 1));
    if (IsNothing(value)) {
      if (is_required) return Expr::Nothing();
      continue;  // may not appear; still excluded from the additional keys
    }
    members.push_back({key, std::move(value), is_required});
  }

  // Additional members: any key but the listed ones, or those of patternProperties / propertyNames.
  if (schema.contains("propertyNames") && !listed.empty()) {
    return Unsupported("propertyNames", pointer, "together with properties");
  }
  Expr additional_key = Expr::Nothing();
  Expr additional_value = Expr::Nothing();
  if (schema.contains("patternProperties")) {
    const Json& patterns = schema.at("patternProperties");
    const std::string patterns_pointer = PointerAppend(pointer, "patternProperties");
    if (!patterns.is_object()) return InvalidValue("patternProperties", pointer, "not an object");
    if (schema.contains("propertyNames")) return Unsupported("propertyNames", pointer, "with patternProperties");
    if (patterns.size() > 1 || !listed.empty() || !(additional.is_boolean() && !additional.get<bool>()) ||
        !required.empty()) {
      return Unsupported("patternProperties", pointer,
                         "only one pattern, without properties or required, with additionalProperties false");
    }
    if (!patterns.empty()) {
      const std::string pattern = patterns.begin().key();
      Json key_schema = Json::object();
      key_schema["type"] = "string";
      key_schema["pattern"] = pattern;
      ASSIGN_OR_RETURN(additional_key, CompileSchema(key_schema, patterns_pointer, depth + 1));
      ASSIGN_OR_RETURN(additional_value,
                       CompileValue(patterns.begin().value(), PointerAppend(patterns_pointer, pattern), depth + 1));
    }
  } else if (!(additional.is_boolean() && !additional.get<bool>())) {
    ASSIGN_OR_RETURN(additional_value, CompileValue(additional, additional_pointer, depth + 1));
    if (schema.contains("propertyNames")) {
      const std::string names_pointer = PointerAppend(pointer, "propertyNames");
      Json string_only = Json::object();
      string_only["type"] = "string";
      ASSIGN_OR_RETURN(Json names, MergeAll({schema.at("propertyNames"), string_only}, names_pointer, depth + 1));
      ASSIGN_OR_RETURN(additional_key, CompileSchema(names, names_pointer, depth + 1));
    } else {
      additional_key = KeyExcluding(listed);
    }
  }
  // Required names no property describes are additional members every instance has.
  for (const Json& name : required) {
    const std::string key = name.get<std::string>();
    if (std::find(listed.begin(), listed.end(), key) != listed.end()) continue;
    if (IsNothing(additional_value) || schema.contains("patternProperties") || schema.contains("propertyNames")) {
      if (schema.contains("patternProperties") || schema.contains("propertyNames")) {
        return Unsupported(schema.contains("patternProperties") ? "patternProperties" : "propertyNames", pointer,
                           "with required names that properties does not list");
      }
      return Expr::Nothing();
    }
    members.push_back({key, additional_value, true});
    listed.push_back(key);
    additional_key = KeyExcluding(listed);
  }
  const Expr additional_member = IsNothing(additional_key) || IsNothing(additional_value)
                                     ? Expr::Nothing()
                                     : Intern("member", Seq({additional_key, Ws(), Lit(":"), Ws(), additional_value}));
  const bool open = !IsNothing(additional_member);

  ASSIGN_OR_RETURN(const CountBounds property_count,
                   ReadCountBounds(schema, "minProperties", "maxProperties", pointer));
  const uint32_t min_properties = property_count.min;
  const uint32_t max_properties = property_count.max;

  std::vector<Expr> member_exprs;
  size_t required_count = 0;
  for (const Member& member : members) {
    const std::string key = nlohmann::json(member.key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    member_exprs.push_back(Seq({Lit(key), Ws(), Lit(":"), Ws(), member.value}));
    required_count += member.required;
  }
  const size_t n = members.size();
  const Expr separator = Seq({Ws(), Lit(","), Ws()});
  const bool counted =
      min_properties > required_count || (max_properties != kUnbounded && (open || max_properties < n));

  if (!counted) {
    // after[i]: members i.. when one precedes; first(i): when none does.
    std::vector<Expr> after(n + 1);
    after[n] = Seq({open ? Expr::Star(Seq({separator, additional_member})) : Expr::Empty(), Ws()});
    size_t optional_prefix = 0;
    while (optional_prefix < n && !members[optional_prefix].required) ++optional_prefix;
    const bool share = optional_prefix > kInlineOptionalPrefix;
    for (size_t i = n; i-- > 0;) {
      Expr part = Seq({separator, member_exprs[i]});
      if (!members[i].required) part = Expr::Optional(std::move(part));
      after[i] = Seq({std::move(part), after[i + 1]});
      if (share) after[i] = Intern("members", std::move(after[i]));
    }
    Expr first = open ? Expr::Optional(Seq({additional_member, after[n]})) : Expr::Empty();
    for (size_t i = n; i-- > 0;) {
      Expr present = Seq({member_exprs[i], after[i + 1]});
      first = members[i].required ? std::move(present) : Alt({std::move(present), std::move(first)});
    }
    return Seq({Lit("{"), Ws(), std::move(first), Lit("}")});
  }

  // Counting: tail(i, c) is members i.. after c members, c capped where larger counts behave the same.
  const uint32_t cap = max_properties != kUnbounded ? max_properties : std::max<uint32_t>(min_properties, 1);
  std::map<std::pair<size_t, uint32_t>, Expr> memo;
  const auto tail = [&](const auto& self, size_t i, uint32_t c) -> Expr {
    const auto found = memo.find({i, c});
    if (found != memo.end()) return found->second;
    Expr body;
    if (i < n) {
      Expr take = Expr::Nothing();
      if (c < max_properties) {
        take = Seq({c > 0 ? separator : Expr::Empty(), member_exprs[i], self(self, i + 1, std::min(c + 1, cap))});
      }
      body = members[i].required ? std::move(take) : Alt({std::move(take), self(self, i + 1, c)});
    } else {
      const uint32_t low = min_properties > c ? min_properties - c : 0;
      const uint32_t high = !open ? 0 : max_properties == kUnbounded ? kUnbounded : max_properties - c;
      if (low > high) {
        body = Expr::Nothing();
      } else if (c > 0) {
        body = Seq({Expr::Repeat(Seq({separator, additional_member}), low, high), Ws()});
      } else {
        body = Alt({low == 0 ? Expr::Empty() : Expr::Nothing(),
                    high >= 1 ? Seq({additional_member,
                                     Expr::Repeat(Seq({separator, additional_member}), std::max<uint32_t>(low, 1) - 1,
                                                  high == kUnbounded ? kUnbounded : high - 1),
                                     Ws()})
                              : Expr::Nothing()});
      }
    }
    Expr ref = Intern(absl::StrCat("members-", i, "-", c), std::move(body));
    memo.emplace(std::make_pair(i, c), ref);
    return ref;
  };
  return Seq({Lit("{"), Ws(), tail(tail, 0, 0), Lit("}")});
}

absl::StatusOr<Expr> SchemaCompiler::CompileArray(const Json& schema, const std::string& pointer, int depth) {
  std::vector<Expr> prefix;
  if (schema.contains("prefixItems")) {
    const Json& items = schema.at("prefixItems");
    if (!items.is_array()) return InvalidValue("prefixItems", pointer, "not an array");
    for (size_t i = 0; i < items.size(); ++i) {
      ASSIGN_OR_RETURN(Expr item,
                       CompileValue(items[i], PointerAppend(PointerAppend(pointer, "prefixItems"), i), depth + 1));
      if (IsNothing(item)) break;  // no array reaches this position
      prefix.push_back(std::move(item));
    }
  }
  ASSIGN_OR_RETURN(const CountBounds item_count, ReadCountBounds(schema, "minItems", "maxItems", pointer));
  const uint32_t min_items = item_count.min;
  uint32_t max_items = item_count.max;
  if (schema.contains("prefixItems") && prefix.size() < schema.at("prefixItems").size()) {
    max_items = std::min<uint32_t>(max_items, static_cast<uint32_t>(prefix.size()));
  }
  Expr item = AnyValue();
  if (schema.contains("items")) {
    if (schema.at("items").is_array()) {
      return Unsupported("items", pointer, "the array form (draft 2019-09 and before); use prefixItems");
    }
    ASSIGN_OR_RETURN(item, CompileValue(schema.at("items"), PointerAppend(pointer, "items"), depth + 1));
  }
  if (IsNothing(item)) max_items = std::min<uint32_t>(max_items, static_cast<uint32_t>(prefix.size()));
  if (min_items > max_items) return Expr::Nothing();
  if (max_items == 0) return Seq({Lit("["), Ws(), Lit("]")});
  if (max_items != kUnbounded && max_items > kInlineItemRepeat) item = Intern("item", std::move(item));

  const Expr separator = Seq({Ws(), Lit(","), Ws()});
  const uint32_t k = static_cast<uint32_t>(prefix.size());
  // rest: the elements after the first j.
  Expr rest = Expr::Empty();
  if (max_items > k) {
    const uint32_t j = std::max<uint32_t>(k, 1);
    rest = Expr::Repeat(Seq({separator, item}), min_items > j ? min_items - j : 0,
                        max_items == kUnbounded ? kUnbounded : max_items - j);
  }
  for (uint32_t j = std::min<uint32_t>(k, max_items); j-- > 1;) {
    Expr next = Seq({separator, prefix[j], std::move(rest)});
    rest = j >= min_items ? Expr::Optional(std::move(next)) : std::move(next);
  }
  Expr elements = Seq({k > 0 ? prefix[0] : item, std::move(rest), Ws()});
  return Seq({Lit("["), Ws(), min_items == 0 ? Expr::Optional(std::move(elements)) : std::move(elements), Lit("]")});
}

}  // namespace llmc::grammar::json_schema
