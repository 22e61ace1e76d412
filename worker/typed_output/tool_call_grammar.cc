// The grammar of a ToolCallConstraint: the calls in the model's own syntax (one rule per format below), the
// optional reasoning block before them, and what an AUTO answer may say instead.
#include "worker/typed_output/tool_call_grammar.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "worker/typed_output/call_parsing.h"
#include "worker/typed_output/constraint_grammar.h"
#include "worker/typed_output/output_format.h"
#include "worker/typed_output/tool_call_grammar_arguments.h"

namespace llmc::typed_output {
namespace {

using grammar::Expr;
using grammar::Grammar;
using Json = nlohmann::ordered_json;

constexpr absl::string_view kToolCall = "<tool_call>";
constexpr absl::string_view kToolCallEnd = "</tool_call>";
constexpr absl::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr absl::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr absl::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr absl::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
constexpr absl::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
constexpr absl::string_view kDeepSeekSep = "<｜tool▁sep｜>";

// A JSON string's canonical text (what the JSON Schema compiler writes too).
std::string JsonString(const std::string& text) {
  return Json(text).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// How calls are laid out in one format: a block `open call (sep call)* close`, found in free text by
// `marker`; formats without a marker (llama3_json, pythonic) write calls only as the whole answer, which
// then begins with `start`. Their parsers read any answer that begins with `start` (after whitespace) as a
// candidate for calls, so under AUTO other answers may not begin with it.
struct Layout {
  std::string marker;
  std::string start;
  Expr open, sep, close;
  bool trailing_whitespace = false;  // after the block (hermes and qwen3_coder end their lines)
};

Layout LayoutOf(ToolCallFormat format) {
  Layout layout;
  switch (format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3CoderXml:
      layout.marker = std::string(kToolCall);
      layout.sep = Lit("\n");
      layout.trailing_whitespace = true;
      break;
    case ToolCallFormat::kLlama3Json:
      layout.start = "{";
      layout.sep = Lit("; ");
      break;
    case ToolCallFormat::kPythonic:
      layout.start = "[";
      layout.open = Lit("[");
      layout.sep = Lit(", ");
      layout.close = Lit("]");
      break;
    case ToolCallFormat::kMistral:
      layout.marker = std::string(kMistralCalls);
      // Mistral's SentencePiece models detokenize the array after the control token with a space.
      layout.open = Seq({Lit(kMistralCalls), Expr::Optional(Lit(" ")), Lit("[")});
      layout.sep = Lit(", ");
      layout.close = Lit("]");
      break;
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31:
      layout.marker = std::string(kDeepSeekCallsBegin);
      layout.open = Lit(kDeepSeekCallsBegin);
      layout.sep = Expr::Optional(Lit("\n"));  // DeepSeek's templates put a newline between calls
      layout.close = Lit(kDeepSeekCallsEnd);
      break;
    case ToolCallFormat::kNone:
    case ToolCallFormat::kHarmony:  // refused before a grammar is built (typed_output_plan.cc)
      break;
  }
  return layout;
}

// One call of `tool` in `format`'s syntax; `constrained`: its arguments follow the tool's schema.
absl::StatusOr<Expr> Call(ToolCallFormat format, const IndexedTool& tool, bool constrained, ToolArguments& arguments) {
  const std::string& name = tool.function.name;
  switch (format) {
    case ToolCallFormat::kHermes: {
      ASSIGN_OR_RETURN(Expr args, arguments.JsonObject(tool, constrained));
      return Seq({Lit(absl::StrCat(kToolCall, "\n{\"name\": ", JsonString(name), ", \"arguments\": ")), std::move(args),
                  Lit(absl::StrCat("}\n", kToolCallEnd))});
    }
    case ToolCallFormat::kQwen3CoderXml: {
      ASSIGN_OR_RETURN(Expr parameters, arguments.XmlParameters(tool, constrained));
      return Seq({Lit(absl::StrCat(kToolCall, "\n<function=", name, ">\n")), std::move(parameters),
                  Lit(absl::StrCat("</function>\n", kToolCallEnd))});
    }
    case ToolCallFormat::kLlama3Json: {
      ASSIGN_OR_RETURN(Expr args, arguments.JsonObject(tool, constrained));
      return Seq({Lit(absl::StrCat("{\"name\": ", JsonString(name), ", \"parameters\": ")), std::move(args), Lit("}")});
    }
    case ToolCallFormat::kPythonic: {
      ASSIGN_OR_RETURN(Expr keywords, arguments.PythonicKeywords(tool, constrained));
      return Seq({Lit(absl::StrCat(name, "(")), std::move(keywords), Lit(")")});
    }
    case ToolCallFormat::kMistral: {
      ASSIGN_OR_RETURN(Expr args, arguments.JsonObject(tool, constrained));
      return Seq({Lit(absl::StrCat("{\"name\": ", JsonString(name), ", \"arguments\": ")), std::move(args), Lit("}")});
    }
    case ToolCallFormat::kDeepSeekV3: {
      ASSIGN_OR_RETURN(Expr args, arguments.JsonObject(tool, constrained));
      return Seq({Lit(absl::StrCat(kDeepSeekCallBegin, "function", kDeepSeekSep, name, "\n```json\n")), std::move(args),
                  Lit(absl::StrCat("\n```", kDeepSeekCallEnd))});
    }
    case ToolCallFormat::kDeepSeekV31: {
      ASSIGN_OR_RETURN(Expr args, arguments.JsonObject(tool, constrained));
      return Seq({Lit(absl::StrCat(kDeepSeekCallBegin, name, kDeepSeekSep)), std::move(args), Lit(kDeepSeekCallEnd)});
    }
    case ToolCallFormat::kHarmony:
      return absl::InvalidArgumentError("harmony tool calls cannot be constrained");
    case ToolCallFormat::kNone:
      break;
  }
  return absl::InvalidArgumentError("this model has no tool-call format; set the worker's tool_call_parser");
}

bool IsIdentifier(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Names the parser could not read back out of the format's text are refused rather than forced into calls
// that would come back as content: a tool's name must be a plausible one in every format, and pythonic
// keywords must be identifiers, Qwen3-Coder's parameter names free of markup and line breaks.
absl::Status CheckNames(ToolCallFormat format, const IndexedTool& tool) {
  const std::string& name = tool.function.name;
  if (!internal::IsPlausibleName(name) || (format == ToolCallFormat::kPythonic && !IsIdentifier(name))) {
    return absl::InvalidArgumentError(absl::StrCat("tools[", tool.index, "].function.name: '", name,
                                                   "' cannot be written as a ", std::string(ToolCallFormatName(format)),
                                                   " call this model's parser reads back"));
  }
  if (format != ToolCallFormat::kPythonic && format != ToolCallFormat::kQwen3CoderXml) return absl::OkStatus();
  const auto properties = tool.function.parameters.find("properties");
  std::vector<std::string> keys;
  if (properties != tool.function.parameters.end() && properties->is_object()) {
    for (const auto& [key, unused] : properties->items()) keys.push_back(key);
  }
  const auto required = tool.function.parameters.find("required");
  if (required != tool.function.parameters.end() && required->is_array()) {
    for (const auto& key : *required) {
      if (key.is_string()) keys.push_back(key.get<std::string>());
    }
  }
  for (const std::string& key : keys) {
    const bool readable = format == ToolCallFormat::kPythonic
                              ? IsIdentifier(key)
                              : !key.empty() && key.find_first_of("<>\n\r") == std::string::npos;
    if (!readable) {
      return absl::InvalidArgumentError(absl::StrCat("tools[", tool.index, "].function.parameters: the property '", key,
                                                     "' cannot be written as a ",
                                                     std::string(ToolCallFormatName(format)), " argument name"));
    }
  }
  return absl::OkStatus();
}

// The reasoning block an answer may begin with (or, when the prompt opened it, begins inside).
Expr Reasoning(Grammar& host, const v1::ToolCallConstraint& constraint) {
  const std::string& start = constraint.reasoning_start();
  const std::string& end = constraint.reasoning_end();
  if (end.empty()) return Expr::Empty();
  if (constraint.starts_in_reasoning()) return Seq({TextWithout(host, end), Lit(end), BoundedWhitespace()});
  if (start.empty()) return Expr::Empty();
  return Expr::Optional(Seq({Lit(start), TextWithout(host, end), Lit(end), BoundedWhitespace()}));
}

absl::StatusOr<std::vector<IndexedTool>> ReadTools(const std::string& tools_json) {
  ASSIGN_OR_RETURN(std::vector<FunctionTool> functions, ReadFunctionTools(tools_json));
  // ReadFunctionTools skips tools of other types: find each function's place in the array, for messages.
  std::vector<size_t> places;
  const Json parsed = Json::parse(tools_json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_array()) {
    for (size_t i = 0; i < parsed.size(); ++i) {
      if (!parsed[i].is_object()) continue;
      const auto type = parsed[i].find("type");
      if (type == parsed[i].end() || (type->is_string() && type->get<std::string>() == "function")) {
        places.push_back(i);
      }
    }
  }
  std::vector<IndexedTool> tools;
  for (size_t k = 0; k < functions.size(); ++k) {
    tools.push_back(IndexedTool{std::move(functions[k]), k < places.size() ? places[k] : k});
  }
  return tools;
}

// The request's own structured output (response_format, ...) inside `out`. Its errors are the request's: the
// worker names the constraint's source in front of them.
absl::StatusOr<Expr> ContentGrammar(Grammar& out, const v1::OutputConstraint& content,
                                    const grammar::JsonSchemaOptions& json_options) {
  if (content.kind_case() == v1::OutputConstraint::kToolCalls) {
    return absl::InvalidArgumentError("the content constraint of tool calls cannot itself be tool calls");
  }
  ASSIGN_OR_RETURN(const Grammar grammar, ConstraintGrammar(content, json_options));
  return EmbedGrammar(out, grammar);
}

}  // namespace

absl::StatusOr<Grammar> BuildToolCallGrammar(const v1::ToolCallConstraint& constraint,
                                             const grammar::JsonSchemaOptions& json_options) {
  const bool has_content =
      constraint.has_content() && constraint.content().kind_case() != v1::OutputConstraint::KIND_NOT_SET;
  if (constraint.choice() == v1::TOOL_CHOICE_AUTO && constraint.tools_json().empty() && has_content) {
    // A structured output on a reasoning model: the reasoning block first, then the answer it constrains.
    Grammar out;
    out.root = out.AddRule("root");
    Expr reasoning = Reasoning(out, constraint);
    ASSIGN_OR_RETURN(Expr content, ContentGrammar(out, constraint.content(), json_options));
    out.rules[out.root].body = Seq({std::move(reasoning), std::move(content)});
    return out;
  }
  ASSIGN_OR_RETURN(const ToolCallFormat format, ParseToolCallFormat(constraint.format()));
  if (format == ToolCallFormat::kNone) {
    return absl::InvalidArgumentError("this model has no tool-call format; set the worker's tool_call_parser");
  }
  ASSIGN_OR_RETURN(const std::vector<IndexedTool> tools, ReadTools(constraint.tools_json()));
  if (tools.empty()) return absl::InvalidArgumentError("there are no function tools to call");
  for (const IndexedTool& tool : tools) RETURN_IF_ERROR(CheckNames(format, tool));

  Grammar out;
  out.root = out.AddRule("root");
  ToolArguments arguments(out, json_options);
  std::vector<Expr> calls;
  bool parallel = constraint.parallel();
  switch (constraint.choice()) {
    case v1::TOOL_CHOICE_NAMED: {
      const IndexedTool* named = nullptr;
      for (const IndexedTool& tool : tools) {
        if (tool.function.name == constraint.name()) named = &tool;
      }
      if (named == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("tool_choice names '", constraint.name(), "', which is not among the tools"));
      }
      ASSIGN_OR_RETURN(Expr call, Call(format, *named, /*constrained=*/true, arguments));
      calls.push_back(std::move(call));
      parallel = false;
      break;
    }
    case v1::TOOL_CHOICE_REQUIRED:
    case v1::TOOL_CHOICE_AUTO:
      for (const IndexedTool& tool : tools) {
        const bool constrained = constraint.choice() == v1::TOOL_CHOICE_REQUIRED || tool.function.strict;
        ASSIGN_OR_RETURN(Expr call, Call(format, tool, constrained, arguments));
        calls.push_back(std::move(call));
      }
      break;
    default:
      return absl::InvalidArgumentError("tool_choice none constrains no tool calls");
  }

  const Layout layout = LayoutOf(format);
  const Expr call = Expr::RuleRef(out.AddRule("tool_call", Alt(std::move(calls))));
  Expr block = Seq({layout.open, call, parallel ? Expr::Star(Seq({layout.sep, call})) : Expr::Empty(), layout.close,
                    layout.trailing_whitespace ? BoundedWhitespace() : Expr::Empty()});
  Expr reasoning = Reasoning(out, constraint);
  Expr answer;
  if (constraint.choice() != v1::TOOL_CHOICE_AUTO) {
    answer = std::move(block);
  } else if (has_content) {
    ASSIGN_OR_RETURN(Expr content, ContentGrammar(out, constraint.content(), json_options));
    answer = Alt({std::move(content), std::move(block)});
  } else if (!layout.marker.empty()) {
    answer = Seq({TextWithout(out, layout.marker), Expr::Optional(std::move(block))});
  } else {
    // Calls are the whole answer, after at most a little whitespace; other text may not look like them.
    Expr content =
        Seq({Expr::Star(Expr::CharClass(WhitespaceRanges())), TextNotStartingWith(layout.start, WhitespaceRanges())});
    answer = Alt({Seq({BoundedWhitespace(), std::move(block)}), std::move(content)});
  }
  out.rules[out.root].body = Seq({std::move(reasoning), std::move(answer)});
  return out;
}

}  // namespace llmc::typed_output
