// JSON Schema to grammar: the entry points, keyword checks, $ref rules, enum/const and the applicators.
// Objects and arrays are in json_schema_objects.cc, strings in json_schema_strings.cc and
// json_schema_formats.cc, numbers in json_schema_numbers.cc, allOf merging in json_schema_merge.cc.
#include "worker/grammar/json_schema_compiler.h"

#include <algorithm>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "worker/grammar/json_schema_internal.h"

namespace llmc::grammar {
namespace json_schema {
namespace {

constexpr int kMaxDepth = 200;
// anyOf x oneOf cross products beyond this many branches are refused rather than built.
constexpr size_t kMaxBranches = 64;

bool Contains(const std::vector<absl::string_view>& set, absl::string_view key) {
  return std::find(set.begin(), set.end(), key) != set.end();
}

const std::vector<absl::string_view>& MetadataKeywords() {
  static const auto* const keywords = new std::vector<absl::string_view>{
      "description", "title",   "$schema",    "$id",       "$comment", "examples",
      "default",     "deprecated", "readOnly", "writeOnly", "$defs",    "definitions"};
  return *keywords;
}

const std::vector<absl::string_view>& SupportedKeywords() {
  static const auto* const keywords = new std::vector<absl::string_view>{
      "type",          "enum",          "const",           "$ref",
      "allOf",         "anyOf",         "oneOf",           "properties",
      "required",      "additionalProperties", "minProperties", "maxProperties",
      "patternProperties", "propertyNames", "unevaluatedProperties", "items",
      "prefixItems",   "minItems",      "maxItems",        "uniqueItems",
      "minLength",     "maxLength",     "pattern",         "format",
      "minimum",       "maximum",       "exclusiveMinimum", "exclusiveMaximum",
      "multipleOf"};
  return *keywords;
}

const std::vector<absl::string_view>& ObjectKeywords() {
  static const auto* const keywords = new std::vector<absl::string_view>{
      "properties",    "required",          "additionalProperties", "minProperties",
      "maxProperties", "patternProperties", "propertyNames",        "unevaluatedProperties"};
  return *keywords;
}

const std::vector<absl::string_view>& ArrayKeywords() {
  static const auto* const keywords =
      new std::vector<absl::string_view>{"items", "prefixItems", "minItems", "maxItems", "uniqueItems"};
  return *keywords;
}

// A rule name from a JSON pointer: its last tokens, with characters other than [A-Za-z0-9_-] dropped.
std::string RuleNameFromPointer(absl::string_view prefix, absl::string_view pointer) {
  std::string tail(pointer.substr(pointer.size() > 40 ? pointer.size() - 40 : 0));
  std::string name(prefix);
  for (const char c : tail) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') {
      name += c;
    } else if (c == '/' && !name.empty() && name.back() != '-') {
      name += '-';
    }
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

}  // namespace

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
  if (value.is_number_float() && value.get<double>() >= 0 && value.get<double>() == static_cast<int64_t>(value)) {
    return static_cast<uint32_t>(std::min<double>(value.get<double>(), kUnbounded - 1));
  }
  return InvalidValue(keyword, pointer, "not a non-negative integer");
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
      const double number = value.get<double>();
      return number == static_cast<double>(static_cast<int64_t>(number)) ? kIntegerBit : kFractionalBit;
    }
    default:
      return 0;
  }
}

bool IsMetadataKeyword(absl::string_view keyword) { return Contains(MetadataKeywords(), keyword); }

bool IsAssertionKeyword(absl::string_view keyword) { return !IsMetadataKeyword(keyword); }

absl::Status SchemaCompiler::CheckKeywords(const Json& schema, absl::string_view pointer) {
  for (const auto& [key, value] : schema.items()) {
    if (IsMetadataKeyword(key)) continue;
    if (!Contains(SupportedKeywords(), key)) return Unsupported(key, pointer);
    if (key == "uniqueItems") {
      if (!value.is_boolean()) return InvalidValue(key, pointer, "not a boolean");
      if (value.get<bool>()) return Unsupported(key, pointer, "a grammar cannot enforce distinct items");
    }
  }
  return absl::OkStatus();
}

// ---- The compiler ----

SchemaCompiler::SchemaCompiler(const Json& root, const JsonSchemaOptions& options) : root_(root), options_(options) {}

Expr SchemaCompiler::Ws() const {
  if (options_.max_whitespace == 0) return Expr::Empty();
  return Expr::Repeat(Chars(" \n\t"), 0, options_.max_whitespace);
}

Expr SchemaCompiler::Intern(absl::string_view name_hint, Expr body) {
  if (body.kind == Expr::Kind::kRuleRef || IsNothing(body)) return body;
  std::string key = ExprToString(body, grammar_);
  const auto it = interned_.find(key);
  if (it != interned_.end()) return Expr::RuleRef(it->second);
  std::string name(name_hint);
  if (name.empty()) name = "rule";
  if (grammar_.FindRule(name) >= 0) name = absl::StrCat(name, "_", grammar_.rules.size());
  const int32_t id = grammar_.AddRule(name, std::move(body));
  interned_.emplace(std::move(key), id);
  return Expr::RuleRef(id);
}

Expr SchemaCompiler::AnyString() {
  if (string_rule_ < 0) {
    string_rule_ = grammar_.AddRule("string", Seq({Lit("\""), Expr::Star(JsonStringChar()), Lit("\"")}));
  }
  return Expr::RuleRef(string_rule_);
}

Expr SchemaCompiler::AnyValue() {
  if (value_rule_ >= 0) return Expr::RuleRef(value_rule_);
  value_rule_ = grammar_.AddRule("value");
  const Expr string = AnyString();
  const int32_t object = grammar_.AddRule("object");
  const int32_t array = grammar_.AddRule("array");
  const Expr key = KeyExcluding({});
  const Expr value = Expr::RuleRef(value_rule_);
  const Expr separator = Seq({Ws(), Lit(","), Ws()});
  const Expr member = Seq({key, Ws(), Lit(":"), Ws(), value});
  grammar_.rules[object].body =
      Seq({Lit("{"), Ws(),
           Expr::Optional(Seq({member, Expr::Star(Seq({separator, member})), Ws()})), Lit("}")});
  grammar_.rules[array].body =
      Seq({Lit("["), Ws(), Expr::Optional(Seq({value, Expr::Star(Seq({separator, value})), Ws()})), Lit("]")});
  absl::StatusOr<Expr> number = NumberExpr(Json::object(), "", /*integer=*/false);
  grammar_.rules[value_rule_].body =
      Alt({Expr::RuleRef(object), Expr::RuleRef(array), string, std::move(number).value(), Lit("true"),
           Lit("false"), Lit("null")});
  return Expr::RuleRef(value_rule_);
}

absl::StatusOr<Expr> SchemaCompiler::CompileValue(const Json& schema, const std::string& pointer, int depth) {
  absl::StatusOr<Expr> expr = CompileSchema(schema, pointer, depth);
  if (!expr.ok()) return expr;
  // Small bodies stay inline: a rule call costs a stack frame per step in the matcher.
  const std::string text = ExprToString(*expr, grammar_);
  if (text.size() <= 48 && text.find('{') == std::string::npos) return expr;
  return Intern(RuleNameFromPointer("", pointer), *std::move(expr));
}

absl::StatusOr<Expr> SchemaCompiler::CompileSchema(const Json& schema, const std::string& pointer, int depth) {
  if (depth > kMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat("JSON Schema nested too deeply at ", DisplayPointer(pointer)));
  }
  if (schema.is_boolean()) return schema.get<bool>() ? AnyValue() : Expr::Nothing();
  if (!schema.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a JSON Schema must be an object or a boolean at ", DisplayPointer(pointer)));
  }
  RETURN_IF_ERROR(CheckKeywords(schema, pointer));
  if (schema.contains("$ref")) {
    bool siblings = false;
    for (const auto& [key, value] : schema.items()) siblings |= key != "$ref" && IsAssertionKeyword(key);
    if (!siblings) return CompileRef(schema.at("$ref"), pointer, depth);
    // Draft 2020-12: $ref applies alongside its sibling keywords, as if both were in an allOf.
    Json rest = schema;
    rest.erase("$ref");
    Json ref_only = Json::object();
    ref_only["$ref"] = schema.at("$ref");
    ASSIGN_OR_RETURN(Json merged, MergeAll({ref_only, rest}, pointer, depth + 1));
    return CompileSchema(merged, pointer, depth + 1);
  }
  if (schema.contains("allOf")) {
    ASSIGN_OR_RETURN(Json merged, MergeAll({schema}, pointer, depth + 1));
    return CompileSchema(merged, pointer, depth + 1);
  }
  if (schema.contains("anyOf") || schema.contains("oneOf")) return CompileApplicators(schema, pointer, depth);
  ASSIGN_OR_RETURN(uint32_t types, DeclaredTypes(schema, pointer));
  if (schema.contains("enum") || schema.contains("const")) return CompileEnum(schema, pointer, types);
  return CompileTypes(schema, pointer, depth, types);
}

absl::StatusOr<Expr> SchemaCompiler::CompileRef(const Json& ref, const std::string& pointer, int depth) {
  std::string target_pointer;
  ASSIGN_OR_RETURN(const Json* target, ResolveRef(ref, pointer, &target_pointer));
  const auto it = ref_rules_.find(target_pointer);
  if (it != ref_rules_.end()) return Expr::RuleRef(it->second);
  std::string name = RuleNameFromPointer("", target_pointer);
  if (name.empty()) name = "schema";
  if (grammar_.FindRule(name) >= 0) name = absl::StrCat(name, "_", grammar_.rules.size());
  // The rule exists before its body is compiled, so that recursive references find it.
  const int32_t rule = grammar_.AddRule(name);
  ref_rules_.emplace(target_pointer, rule);
  ASSIGN_OR_RETURN(Expr body, CompileSchema(*target, target_pointer, depth + 1));
  grammar_.rules[rule].body = std::move(body);
  return Expr::RuleRef(rule);
}

absl::StatusOr<Expr> SchemaCompiler::CompileApplicators(const Json& schema, const std::string& pointer, int depth) {
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (schema.contains(keyword) && (!schema.at(keyword).is_array() || schema.at(keyword).empty())) {
      return InvalidValue(keyword, pointer, "not a non-empty array of schemas");
    }
  }
  if (schema.contains("oneOf")) {
    RETURN_IF_ERROR(CheckOneOfDisjoint(schema.at("oneOf"), PointerAppend(pointer, "oneOf"), depth + 1));
  }
  Json siblings = schema;
  siblings.erase("anyOf");
  siblings.erase("oneOf");
  bool has_siblings = false;
  for (const auto& [key, value] : siblings.items()) has_siblings |= IsAssertionKeyword(key);

  std::vector<std::pair<Json, std::string>> branches;  // (schema, pointer)
  if (schema.contains("anyOf") && schema.contains("oneOf")) {
    const Json& any_of = schema.at("anyOf");
    const Json& one_of = schema.at("oneOf");
    if (any_of.size() * one_of.size() > kMaxBranches) {
      return Unsupported("oneOf", pointer, "too many combinations with anyOf");
    }
    for (const Json& a : any_of) {
      for (const Json& b : one_of) {
        Json both = Json::object();
        both["allOf"] = Json::array({a, b});
        branches.emplace_back(std::move(both), PointerAppend(pointer, "anyOf"));
      }
    }
  } else {
    const char* keyword = schema.contains("anyOf") ? "anyOf" : "oneOf";
    const Json& list = schema.at(keyword);
    for (size_t i = 0; i < list.size(); ++i) {
      branches.emplace_back(list[i], PointerAppend(PointerAppend(pointer, keyword), i));
    }
  }
  std::vector<Expr> choices;
  for (auto& [branch, branch_pointer] : branches) {
    absl::StatusOr<Expr> expr;
    if (has_siblings) {
      ASSIGN_OR_RETURN(Json merged, MergeAll({siblings, branch}, branch_pointer, depth + 1));
      expr = CompileSchema(merged, branch_pointer, depth + 1);
    } else {
      expr = CompileSchema(branch, branch_pointer, depth + 1);
    }
    if (!expr.ok()) return expr.status();
    choices.push_back(*std::move(expr));
  }
  return Alt(std::move(choices));
}

absl::StatusOr<bool> SchemaCompiler::EnumValueAllowed(const Json& value, const Json& schema,
                                                      const std::string& pointer) {
  const uint32_t type = TypeOfValue(value);
  if (type == kStringBit) {
    const size_t length = CodePointCount(value.get<std::string>());
    if (schema.contains("minLength")) {
      ASSIGN_OR_RETURN(uint32_t min, CountKeyword(schema, "minLength", pointer));
      if (length < min) return false;
    }
    if (schema.contains("maxLength")) {
      ASSIGN_OR_RETURN(uint32_t max, CountKeyword(schema, "maxLength", pointer));
      if (length > max) return false;
    }
    if (schema.contains("format")) return Unsupported("format", pointer, "alongside enum or const");
    if (schema.contains("pattern")) {
      if (!schema.at("pattern").is_string()) return InvalidValue("pattern", pointer, "not a string");
      try {
        const std::regex regex(schema.at("pattern").get<std::string>(), std::regex::ECMAScript);
        if (!std::regex_search(value.get<std::string>(), regex)) return false;
      } catch (const std::regex_error&) {
        return Unsupported("pattern", pointer, "alongside enum or const");
      }
    }
    return true;
  }
  if (type == kIntegerBit || type == kFractionalBit) return NumberSatisfies(value, schema, pointer);
  if (type == kArrayBit) {
    for (const absl::string_view keyword : ArrayKeywords()) {
      if (keyword == "minItems" || keyword == "maxItems" || !schema.contains(std::string(keyword))) continue;
      return Unsupported(keyword, pointer, "alongside enum or const");
    }
    if (schema.contains("minItems")) {
      ASSIGN_OR_RETURN(uint32_t min, CountKeyword(schema, "minItems", pointer));
      if (value.size() < min) return false;
    }
    if (schema.contains("maxItems")) {
      ASSIGN_OR_RETURN(uint32_t max, CountKeyword(schema, "maxItems", pointer));
      if (value.size() > max) return false;
    }
  }
  if (type == kObjectBit) {
    for (const absl::string_view keyword : ObjectKeywords()) {
      if (schema.contains(std::string(keyword))) return Unsupported(keyword, pointer, "alongside enum or const");
    }
  }
  return true;
}

absl::StatusOr<Expr> SchemaCompiler::CompileEnum(const Json& schema, const std::string& pointer, uint32_t types) {
  std::vector<Json> values;
  if (schema.contains("enum")) {
    if (!schema.at("enum").is_array()) return InvalidValue("enum", pointer, "not an array");
    values.assign(schema.at("enum").begin(), schema.at("enum").end());
  }
  if (schema.contains("const")) {
    const Json& constant = schema.at("const");
    if (schema.contains("enum")) {
      const bool listed = std::find(values.begin(), values.end(), constant) != values.end();
      values.clear();
      if (listed) values.push_back(constant);
    } else {
      values.push_back(constant);
    }
  }
  std::vector<std::string> literals;
  for (const Json& value : values) {
    if ((TypeOfValue(value) & types) == 0) continue;
    ASSIGN_OR_RETURN(bool allowed, EnumValueAllowed(value, schema, pointer));
    if (!allowed) continue;
    std::string text = value.dump();
    if (std::find(literals.begin(), literals.end(), text) == literals.end()) literals.push_back(std::move(text));
  }
  std::vector<Expr> choices;
  for (const std::string& literal : literals) choices.push_back(Lit(literal));
  return Alt(std::move(choices));
}

absl::StatusOr<Expr> SchemaCompiler::CompileTypes(const Json& schema, const std::string& pointer, int depth,
                                                  uint32_t types) {
  bool has_assertions = false;
  for (const auto& [key, value] : schema.items()) has_assertions |= IsAssertionKeyword(key);
  if (types == kAllTypes && !has_assertions) return AnyValue();
  std::vector<Expr> choices;
  if (types & kNullBit) choices.push_back(Lit("null"));
  if (types & kBooleanBit) choices.push_back(Alt({Lit("true"), Lit("false")}));
  if (types & kObjectBit) {
    ASSIGN_OR_RETURN(Expr object, CompileObject(schema, pointer, depth));
    choices.push_back(std::move(object));
  }
  if (types & kArrayBit) {
    ASSIGN_OR_RETURN(Expr array, CompileArray(schema, pointer, depth));
    choices.push_back(std::move(array));
  }
  if (types & kStringBit) {
    ASSIGN_OR_RETURN(Expr string, CompileString(schema, pointer, depth));
    choices.push_back(std::move(string));
  }
  if (types & (kIntegerBit | kFractionalBit)) {
    ASSIGN_OR_RETURN(Expr number, NumberExpr(schema, pointer, (types & kFractionalBit) == 0));
    choices.push_back(std::move(number));
  }
  return Alt(std::move(choices));
}

absl::StatusOr<Grammar> SchemaCompiler::CompileRoot() {
  ASSIGN_OR_RETURN(Expr schema, CompileRef(Json("#"), "", 0));
  if (IsNothing(grammar_.rules[schema.rule].body)) {
    return absl::InvalidArgumentError("the JSON Schema accepts no value");
  }
  grammar_.root = grammar_.AddRule("root", Seq({Ws(), std::move(schema), Ws()}));
  return std::move(grammar_);
}

Grammar SchemaCompiler::AnyObjectGrammar() {
  AnyValue();
  const int32_t object = grammar_.FindRule("object");
  grammar_.root = grammar_.AddRule("root", Seq({Ws(), Expr::RuleRef(object), Ws()}));
  return std::move(grammar_);
}

}  // namespace json_schema

absl::StatusOr<Grammar> CompileJsonSchema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  json_schema::SchemaCompiler compiler(schema, options);
  return compiler.CompileRoot();
}

Grammar JsonObjectGrammar(const JsonSchemaOptions& options) {
  const nlohmann::ordered_json empty = nlohmann::ordered_json::object();
  json_schema::SchemaCompiler compiler(empty, options);
  return compiler.AnyObjectGrammar();
}

}  // namespace llmc::grammar
