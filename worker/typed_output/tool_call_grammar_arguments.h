#ifndef LLMC_WORKER_TYPED_OUTPUT_TOOL_CALL_GRAMMAR_ARGUMENTS_H_
#define LLMC_WORKER_TYPED_OUTPUT_TOOL_CALL_GRAMMAR_ARGUMENTS_H_

// Internal to tool_call_grammar*.cc: the grammars of one call's arguments in each format's shape.

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema_compiler.h"
#include "worker/typed_output/output_format.h"

namespace llmc::typed_output {

// A function tool and its place in the request's `tools` array (named in messages).
struct IndexedTool {
  FunctionTool function;
  size_t index = 0;
};

// Shorthands for the expressions the builders write.
inline grammar::Expr Lit(absl::string_view bytes) { return grammar::Expr::Literal(bytes); }
inline grammar::Expr Seq(std::vector<grammar::Expr> children) { return grammar::Expr::Sequence(std::move(children)); }
inline grammar::Expr Alt(std::vector<grammar::Expr> children) { return grammar::Expr::Choice(std::move(children)); }

// Space, tab, \n, \r.
const std::vector<grammar::CodePointRange>& WhitespaceRanges();
// At most a few whitespace characters (so that the grammar stays small and the model cannot loop there).
grammar::Expr BoundedWhitespace();

// Builds argument grammars into `host`. Unconstrained arguments (AUTO, a tool that is not strict) are any
// JSON object, or any parameters; constrained ones follow the tool's `parameters` schema, compiled with the
// caller's options and the tool's own `strict`. A schema that cannot be enforced is INVALID_ARGUMENT
// prefixed with "tools[i].function.parameters: ".
class ToolArguments {
 public:
  ToolArguments(grammar::Grammar& host, const grammar::JsonSchemaOptions& options);

  // The arguments as one JSON object (hermes, llama3_json, mistral, deepseek).
  absl::StatusOr<grammar::Expr> JsonObject(const IndexedTool& tool, bool constrained);
  // qwen3_coder: `<parameter=P>\nVALUE\n</parameter>\n` per parameter, required ones always and in the order
  // of `properties`; a string-typed VALUE is raw text without "</parameter>", others JSON.
  absl::StatusOr<grammar::Expr> XmlParameters(const IndexedTool& tool, bool constrained);
  // pythonic: `k=v, k2=v2` (values JSON), required keywords always and in the order of `properties`.
  absl::StatusOr<grammar::Expr> PythonicKeywords(const IndexedTool& tool, bool constrained);

 private:
  grammar::Expr AnyObject();
  grammar::Expr AnyValue();
  grammar::Expr RawText();

  grammar::Grammar& host_;
  const grammar::JsonSchemaOptions options_;
  std::optional<grammar::Expr> any_object_, any_value_, raw_text_;
};

}  // namespace llmc::typed_output

#endif  // LLMC_WORKER_TYPED_OUTPUT_TOOL_CALL_GRAMMAR_ARGUMENTS_H_
