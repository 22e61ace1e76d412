// JSON Schema to grammar: the entry points, $ref rules, enum/const, anyOf/oneOf and the dispatch by type.
// Objects and arrays are in json_schema_objects.cc, strings in json_schema_strings.cc and
// json_schema_formats.cc, numbers in json_schema_numbers.cc, allOf merging in json_schema_merge.cc, keyword
// sets, types and errors in json_schema_keywords.cc.
#include "worker/grammar/json_schema_compiler.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/grammar/json_schema_internal.h"
#include "worker/grammar/matcher.h"
#include "worker/grammar/regex_compiler.h"

namespace llmc::grammar {
namespace json_schema {
namespace {

constexpr int kMaxDepth = 200;

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

// Whether a "$ref" starting with '#' is anywhere inside `json`: below a nested $id, such a reference means
// the embedded resource, not the document.
bool ContainsLocalRef(const Json& json) {
  if (json.is_object()) {
    for (const auto& [key, value] : json.items()) {
      if (key == "$ref" && value.is_string() && absl::StartsWith(value.get<std::string>(), "#")) return true;
      if (ContainsLocalRef(value)) return true;
    }
  } else if (json.is_array()) {
    for (const Json& value : json) {
      if (ContainsLocalRef(value)) return true;
    }
  }
  return false;
}

}  // namespace

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
      Seq({Lit("{"), Ws(), Expr::Optional(Seq({member, Expr::Star(Seq({separator, member})), Ws()})), Lit("}")});
  grammar_.rules[array].body =
      Seq({Lit("["), Ws(), Expr::Optional(Seq({value, Expr::Star(Seq({separator, value})), Ws()})), Lit("]")});
  absl::StatusOr<Expr> number = NumberExpr(Json::object(), "", /*integer=*/false);
  grammar_.rules[value_rule_].body = Alt({Expr::RuleRef(object), Expr::RuleRef(array), string,
                                          std::move(number).value(), Lit("true"), Lit("false"), Lit("null")});
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
  if (schema.contains("nullable")) {
    // OpenAPI 3.0's nullable (what zod-to-json-schema writes for .nullable(), as OpenAI's SDKs use it): the
    // schema, or null.
    const Json& nullable = schema.at("nullable");
    if (!nullable.is_boolean()) return Unsupported("nullable", pointer, "not a boolean");
    Json rest = schema;
    rest.erase("nullable");
    ASSIGN_OR_RETURN(Expr expr, CompileSchema(rest, pointer, depth + 1));
    return nullable.get<bool>() ? Alt({std::move(expr), Lit("null")}) : expr;
  }
  RETURN_IF_ERROR(CheckKeywords(schema, pointer));
  if (!pointer.empty() && schema.contains("$id") && ContainsLocalRef(schema)) {
    return Unsupported("$id", pointer, "an embedded resource's own '#' references");
  }
  bool ref_siblings = false;
  for (const auto& [key, value] : schema.items()) ref_siblings |= key != "$ref" && IsAssertionKeyword(key);
  if (schema.contains("$ref") && !ref_siblings) return CompileRef(schema.at("$ref"), pointer, depth);
  // Draft 2020-12: $ref applies alongside its sibling keywords, as if both were in an allOf.
  if (schema.contains("$ref") || schema.contains("allOf")) {
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
  Json siblings = schema;
  siblings.erase("anyOf");
  siblings.erase("oneOf");
  if (schema.contains("oneOf")) {
    ASSIGN_OR_RETURN(uint32_t context_types, PossibleTypes(siblings, pointer, depth + 1));
    RETURN_IF_ERROR(CheckOneOfDisjoint(schema.at("oneOf"), PointerAppend(pointer, "oneOf"), depth + 1, context_types));
  }
  bool has_siblings = false;
  for (const auto& [key, value] : siblings.items()) has_siblings |= IsAssertionKeyword(key);

  std::vector<std::pair<Json, std::string>> branches;  // (schema, pointer)
  if (schema.contains("anyOf") && schema.contains("oneOf")) {
    const Json& any_of = schema.at("anyOf");
    const Json& one_of = schema.at("oneOf");
    if (any_of.size() * one_of.size() > kMaxSchemaBranches) {
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
    ASSIGN_OR_RETURN(const CountBounds bounds, ReadCountBounds(schema, "minLength", "maxLength", pointer));
    if (length < bounds.min || length > bounds.max) return false;
    if (schema.contains("format")) return Unsupported("format", pointer, "alongside enum or const");
    if (schema.contains("pattern")) {
      if (!schema.at("pattern").is_string()) return InvalidValue("pattern", pointer, "not a string");
      // Our own regex front end and matcher (linear in the value), not std::regex, which recurses per
      // character on client-supplied patterns.
      RegexOptions options;
      options.full_match = false;
      absl::StatusOr<Expr> pattern = CompileRegex(schema.at("pattern").get<std::string>(), options);
      if (!pattern.ok()) return Unsupported("pattern", pointer, "alongside enum or const");
      Grammar grammar;
      grammar.root = grammar.AddRule("root", *std::move(pattern));
      absl::StatusOr<bool> matches = MatchesText(grammar, value.get<std::string>());
      if (!matches.ok()) return Unsupported("pattern", pointer, "alongside enum or const");
      if (!*matches) return false;
    }
    return true;
  }
  if (type == kIntegerBit || type == kFractionalBit) return NumberSatisfies(value, schema, pointer);
  // Object and array values would need the structural keywords checked; only the counts are.
  for (const auto& [keyword, unused] : schema.items()) {
    if (type == kArrayBit && IsArrayKeyword(keyword) && keyword != "minItems" && keyword != "maxItems") {
      return Unsupported(keyword, pointer, "alongside enum or const");
    }
    if (type == kObjectBit && IsObjectKeyword(keyword)) return Unsupported(keyword, pointer, "alongside enum or const");
  }
  if (type == kArrayBit) {
    ASSIGN_OR_RETURN(const CountBounds bounds, ReadCountBounds(schema, "minItems", "maxItems", pointer));
    if (value.size() < bounds.min || value.size() > bounds.max) return false;
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
    ASSIGN_OR_RETURN(Expr string, CompileString(schema, pointer));
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
