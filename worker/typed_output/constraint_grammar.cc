#include "worker/typed_output/constraint_grammar.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json_shape.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/gbnf_parser.h"
#include "worker/grammar/regex_compiler.h"
#include "worker/typed_output/tool_call_grammar.h"

namespace llmc::typed_output {
namespace {

absl::StatusOr<grammar::Grammar> OneRule(absl::StatusOr<grammar::Expr> body) {
  if (!body.ok()) return body.status();
  grammar::Grammar out;
  out.root = out.AddRule("root", *std::move(body));
  return out;
}

}  // namespace

absl::StatusOr<grammar::Grammar> ConstraintGrammar(const v1::OutputConstraint& constraint,
                                                   const grammar::JsonSchemaOptions& json_options) {
  switch (constraint.kind_case()) {
    case v1::OutputConstraint::kJsonSchema: {
      nlohmann::ordered_json schema;
      RETURN_IF_ERROR(CheckNoNulByte(constraint.json_schema(), "the JSON schema"));
      try {
        schema = nlohmann::ordered_json::parse(constraint.json_schema());
      } catch (const nlohmann::json::exception& error) {
        return absl::InvalidArgumentError(absl::StrCat("the JSON schema is not valid JSON: ", error.what()));
      }
      grammar::JsonSchemaOptions options = json_options;
      options.strict = constraint.strict();
      return grammar::CompileJsonSchema(schema, options);
    }
    case v1::OutputConstraint::kJsonObject: {
      grammar::JsonSchemaOptions options = json_options;
      options.strict = false;
      return grammar::JsonObjectGrammar(options);
    }
    case v1::OutputConstraint::kRegex: {
      grammar::RegexOptions options;
      options.full_match = true;
      return OneRule(grammar::CompileRegex(constraint.regex(), options));
    }
    case v1::OutputConstraint::kChoice: {
      if (constraint.choice().choices().empty()) return absl::InvalidArgumentError("the choice list is empty");
      std::vector<grammar::Expr> choices;
      for (const std::string& choice : constraint.choice().choices()) choices.push_back(grammar::Expr::Literal(choice));
      return OneRule(grammar::Expr::Choice(std::move(choices)));
    }
    case v1::OutputConstraint::kGrammar:
      return grammar::ParseGbnf(constraint.grammar());
    case v1::OutputConstraint::kToolCalls:
      return BuildToolCallGrammar(constraint.tool_calls(), json_options);
    case v1::OutputConstraint::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("the constraint has no kind (json_schema, json_object, regex, choice, grammar)");
}

}  // namespace llmc::typed_output
