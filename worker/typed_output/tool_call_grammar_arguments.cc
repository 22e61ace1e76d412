// The arguments of one call: a JSON object compiled from the tool's schema, or (qwen3_coder, pythonic) the
// schema's properties one by one.
#include "worker/typed_output/tool_call_grammar_arguments.h"

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/typed_output/tool_call_grammar.h"

namespace llmc::typed_output {
namespace {

using grammar::Expr;
using Json = nlohmann::ordered_json;

constexpr absl::string_view kParameterEnd = "</parameter>";
constexpr uint32_t kMaxWhitespace = 4;
// Where a property's own document keeps a copy of the whole parameters schema, for references into it.
constexpr absl::string_view kParametersDef = "__llmc_parameters";

bool IsAnnotation(absl::string_view key) {
  static constexpr absl::string_view kAnnotations[] = {"title",    "description", "$schema", "$id",
                                                       "$comment", "examples",    "default", "deprecated",
                                                       "readOnly", "writeOnly"};
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), key) != std::end(kAnnotations);
}

absl::Status InTool(const absl::Status& status, const IndexedTool& tool, absl::string_view where = "") {
  return absl::Status(status.code(),
                      absl::StrCat("tools[", tool.index, "].function.parameters: ", where, status.message()));
}

// `type` allows an object (or is absent).
bool AllowsObject(const Json& schema) {
  const auto type = schema.find("type");
  if (type == schema.end()) return true;
  if (type->is_string()) return type->get<std::string>() == "object";
  if (type->is_array()) return std::find(type->begin(), type->end(), Json("object")) != type->end();
  return false;
}

// The parameters as a schema of objects only: arguments are always an object.
absl::StatusOr<Json> ObjectSchema(Json schema) {
  if (!AllowsObject(schema)) {
    return absl::InvalidArgumentError("the arguments are a JSON object, which 'type' does not allow");
  }
  schema["type"] = "object";
  return schema;
}

// Points the document-relative references of a schema moved into another document at the copy of the
// parameters schema kept there; references into $defs and definitions stay, since those are copied to the
// new document's top. True if some reference now needs the copy.
bool RewriteReferences(Json& schema) {
  if (!schema.is_object()) return false;
  bool uses_copy = false;
  for (auto& [key, value] : schema.items()) {
    if (key == "$ref") {
      if (!value.is_string()) continue;
      const std::string target = value.get<std::string>();
      if (absl::StartsWith(target, "#") && !absl::StartsWith(target, "#/$defs/") &&
          !absl::StartsWith(target, "#/definitions/")) {
        value = absl::StrCat("#/$defs/", kParametersDef, target.substr(1));
        uses_copy = true;
      }
    } else if (key == "properties" || key == "$defs" || key == "definitions" || key == "patternProperties" ||
               key == "dependentSchemas") {
      if (!value.is_object()) continue;
      for (auto& [name, subschema] : value.items()) uses_copy |= RewriteReferences(subschema);
    } else if (key == "enum" || key == "const" || IsAnnotation(key)) {
      continue;  // values, not schemas
    } else if (value.is_object()) {
      uses_copy |= RewriteReferences(value);
    } else if (value.is_array()) {
      for (Json& item : value) uses_copy |= RewriteReferences(item);
    }
  }
  return uses_copy;
}

// A property's schema as a document of its own, whose references still mean what they meant in the
// parameters schema.
Json PropertyDocument(const Json& parameters, const Json& property) {
  Json document = property;
  bool uses_copy = RewriteReferences(document);
  if (!document.is_object()) return document;
  for (const char* key : {"$defs", "definitions"}) {
    const auto definitions = parameters.find(key);
    if (definitions == parameters.end() || !definitions->is_object()) continue;
    Json copied = *definitions;
    for (auto& [name, subschema] : copied.items()) uses_copy |= RewriteReferences(subschema);
    document[key] = std::move(copied);
  }
  if (uses_copy) {
    Json copy = parameters;
    RewriteReferences(copy);
    document["$defs"][std::string(kParametersDef)] = std::move(copy);
  }
  return document;
}

struct Parameter {
  std::string name;
  Json schema;
  bool required = false;
};

// The parameters one by one, in the order of `properties`, then required names it does not list. Keywords
// that constrain the object as a whole cannot be enforced on arguments written one by one.
absl::StatusOr<std::vector<Parameter>> SplitParameters(const Json& parameters, bool strict) {
  for (const auto& [key, value] : parameters.items()) {
    if (IsAnnotation(key) || key == "type" || key == "properties" || key == "required" ||
        key == "additionalProperties" || key == "unevaluatedProperties" || key == "$defs" || key == "definitions") {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "'", key, "' at the top of the parameters cannot be enforced in this format, which writes them one by one"));
  }
  if (!AllowsObject(parameters)) {
    return absl::InvalidArgumentError("the arguments are an object, which 'type' does not allow");
  }
  std::vector<std::string> required;
  if (const auto it = parameters.find("required"); it != parameters.end()) {
    if (!it->is_array()) return absl::InvalidArgumentError("'required' must be an array of names");
    for (const Json& name : *it) {
      if (!name.is_string()) return absl::InvalidArgumentError("'required' must be an array of names");
      required.push_back(name.get<std::string>());
    }
  }
  const auto is_required = [&](const std::string& name) {
    return std::find(required.begin(), required.end(), name) != required.end();
  };
  std::vector<Parameter> out;
  const auto properties = parameters.find("properties");
  if (properties != parameters.end()) {
    if (!properties->is_object()) return absl::InvalidArgumentError("'properties' must be an object");
    for (const auto& [name, schema] : properties->items()) out.push_back({name, schema, is_required(name)});
  }
  for (const std::string& name : required) {
    if (std::any_of(out.begin(), out.end(), [&](const Parameter& p) { return p.name == name; })) continue;
    auto others = parameters.find("additionalProperties");
    if (others == parameters.end()) others = parameters.find("unevaluatedProperties");
    const bool closed = others == parameters.end() ? strict : others->is_boolean() && !others->get<bool>();
    if (closed) {
      return absl::InvalidArgumentError(
          absl::StrCat("required property '", name, "' is not in 'properties', and no other property is allowed"));
    }
    out.push_back({name, others != parameters.end() && others->is_object() ? *others : Json::object(), true});
  }
  return out;
}

bool IsStringTyped(const Json& schema) {
  if (!schema.is_object()) return false;
  const auto type = schema.find("type");
  if (type == schema.end()) return false;
  if (type->is_string()) return type->get<std::string>() == "string";
  return type->is_array() && type->size() == 1 && (*type)[0] == Json("string");
}

}  // namespace

const std::vector<grammar::CodePointRange>& WhitespaceRanges() {
  static const std::vector<grammar::CodePointRange> kRanges = {{'\t', '\n'}, {'\r', '\r'}, {' ', ' '}};
  return kRanges;
}

Expr BoundedWhitespace() { return Expr::Repeat(Expr::CharClass(WhitespaceRanges()), 0, kMaxWhitespace); }

ToolArguments::ToolArguments(grammar::Grammar& host, const grammar::JsonSchemaOptions& options)
    : host_(host), options_(options) {}

Expr ToolArguments::AnyObject() {
  if (!any_object_.has_value()) {
    grammar::JsonSchemaOptions options = options_;
    options.strict = false;
    any_object_ = EmbedGrammar(host_, grammar::JsonObjectGrammar(options));
  }
  return *any_object_;
}

Expr ToolArguments::AnyValue() {
  if (!any_value_.has_value()) {
    grammar::JsonSchemaOptions options = options_;
    options.strict = false;
    absl::StatusOr<grammar::Grammar> any = grammar::CompileJsonSchema(Json::object(), options);
    any_value_ = any.ok() ? EmbedGrammar(host_, *any) : Expr::Nothing();
  }
  return *any_value_;
}

Expr ToolArguments::RawText() {
  if (!raw_text_.has_value()) raw_text_ = TextWithout(host_, std::string(kParameterEnd));
  return *raw_text_;
}

absl::StatusOr<Expr> ToolArguments::JsonObject(const IndexedTool& tool, bool constrained) {
  const Json& parameters = tool.function.parameters;
  if (!constrained) return AnyObject();
  if (parameters.empty()) return tool.function.strict ? Lit("{}") : AnyObject();
  absl::StatusOr<Json> schema = ObjectSchema(parameters);
  if (!schema.ok()) return InTool(schema.status(), tool);
  grammar::JsonSchemaOptions options = options_;
  options.strict = tool.function.strict;
  absl::StatusOr<grammar::Grammar> compiled = grammar::CompileJsonSchema(*schema, options);
  if (!compiled.ok()) return InTool(compiled.status(), tool);
  return EmbedGrammar(host_, *compiled);
}

namespace {

// A parameter's value: JSON per its schema, or (`raw_strings`) a string-typed one as raw text.
absl::StatusOr<Expr> ParameterValue(grammar::Grammar& host, const Json& parameters, const Parameter& parameter,
                                    grammar::JsonSchemaOptions options, bool raw_strings,
                                    const std::function<Expr()>& raw_text) {
  if (raw_strings && IsStringTyped(parameter.schema)) {
    std::vector<std::string> values;
    bool listed = false;
    for (const auto& [key, value] : parameter.schema.items()) {
      if (key == "enum" || key == "const") {
        std::vector<std::string> here;
        for (const Json& item : key == "enum" && value.is_array() ? value : Json::array({value})) {
          if (item.is_string() && !absl::StrContains(item.get<std::string>(), kParameterEnd)) {
            here.push_back(item.get<std::string>());
          }
        }
        if (listed) {
          here.erase(std::remove_if(here.begin(), here.end(),
                                    [&](const std::string& v) {
                                      return std::find(values.begin(), values.end(), v) == values.end();
                                    }),
                     here.end());
        }
        values = std::move(here);
        listed = true;
      } else if (key != "type" && !IsAnnotation(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", key, "' cannot be enforced on a string parameter, which this format writes as raw text"));
      }
    }
    if (!listed) return raw_text();
    std::vector<Expr> choices;
    for (const std::string& value : values) choices.push_back(Lit(value));
    return Alt(std::move(choices));
  }
  if (parameter.schema.is_boolean() && parameter.schema.get<bool>()) options.strict = false;
  absl::StatusOr<grammar::Grammar> compiled =
      grammar::CompileJsonSchema(PropertyDocument(parameters, parameter.schema), options);
  if (!compiled.ok()) return compiled.status();
  return EmbedGrammar(host, *compiled);
}

}  // namespace

absl::StatusOr<Expr> ToolArguments::XmlParameters(const IndexedTool& tool, bool constrained) {
  const Json& parameters = tool.function.parameters;
  if (!constrained || (parameters.empty() && !tool.function.strict)) {
    return Expr::Star(Seq({Lit("<parameter="), Expr::Plus(Expr::NegatedCharClass({{'\n', '\n'}, {'>', '>'}})),
                           Lit(">\n"), RawText(), Lit(absl::StrCat("\n", kParameterEnd, "\n"))}));
  }
  absl::StatusOr<std::vector<Parameter>> split = SplitParameters(parameters, tool.function.strict);
  if (!split.ok()) return InTool(split.status(), tool);
  grammar::JsonSchemaOptions options = options_;
  options.strict = tool.function.strict;
  std::vector<Expr> items;
  for (const Parameter& parameter : *split) {
    absl::StatusOr<Expr> value =
        ParameterValue(host_, parameters, parameter, options, /*raw_strings=*/true, [this] { return RawText(); });
    if (!value.ok()) return InTool(value.status(), tool, absl::StrCat("property '", parameter.name, "': "));
    Expr item = Seq({Lit(absl::StrCat("<parameter=", parameter.name, ">\n")), *std::move(value),
                     Lit(absl::StrCat("\n", kParameterEnd, "\n"))});
    items.push_back(parameter.required ? std::move(item) : Expr::Optional(std::move(item)));
  }
  return Seq(std::move(items));
}

absl::StatusOr<Expr> ToolArguments::PythonicKeywords(const IndexedTool& tool, bool constrained) {
  const Json& parameters = tool.function.parameters;
  if (!constrained || (parameters.empty() && !tool.function.strict)) {
    const Expr identifier = Seq({Expr::CharClass({{'A', 'Z'}, {'_', '_'}, {'a', 'z'}}),
                                 Expr::Star(Expr::CharClass({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}))});
    const Expr keyword = Seq({identifier, Lit("="), AnyValue()});
    return Expr::Optional(Seq({keyword, Expr::Star(Seq({Lit(", "), keyword}))}));
  }
  absl::StatusOr<std::vector<Parameter>> split = SplitParameters(parameters, tool.function.strict);
  if (!split.ok()) return InTool(split.status(), tool);
  grammar::JsonSchemaOptions options = options_;
  options.strict = tool.function.strict;
  std::vector<Expr> keywords;
  bool any_optional = false;
  for (const Parameter& parameter : *split) {
    absl::StatusOr<Expr> value =
        ParameterValue(host_, parameters, parameter, options, /*raw_strings=*/false, [] { return Expr::Nothing(); });
    if (!value.ok()) return InTool(value.status(), tool, absl::StrCat("property '", parameter.name, "': "));
    keywords.push_back(Seq({Lit(absl::StrCat(parameter.name, "=")), *std::move(value)}));
    any_optional |= !parameter.required;
  }
  const size_t n = keywords.size();
  if (!any_optional) {
    std::vector<Expr> items;
    for (size_t j = 0; j < n; ++j) items.push_back(Seq({j == 0 ? Expr::Empty() : Lit(", "), keywords[j]}));
    return Seq(std::move(items));
  }
  // rest(j, first): the keywords from j on, `first` when none was written before (no separator). One rule
  // each, since optional keywords would otherwise copy what follows them.
  std::vector<std::array<int32_t, 2>> rules(n, {-1, -1});
  std::function<Expr(size_t, bool)> rest = [&](size_t j, bool first) -> Expr {
    if (j == n) return Expr::Empty();
    int32_t& rule = rules[j][first ? 1 : 0];
    if (rule < 0) {
      Expr with = Seq({first ? Expr::Empty() : Lit(", "), keywords[j], rest(j + 1, false)});
      Expr body = (*split)[j].required ? std::move(with) : Alt({std::move(with), rest(j + 1, first)});
      rule = host_.AddRule(absl::StrCat("keywords", host_.rules.size()), std::move(body));
    }
    return Expr::RuleRef(rule);
  };
  return rest(0, true);
}

}  // namespace llmc::typed_output
