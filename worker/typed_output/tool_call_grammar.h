#ifndef LLMC_WORKER_TYPED_OUTPUT_TOOL_CALL_GRAMMAR_H_
#define LLMC_WORKER_TYPED_OUTPUT_TOOL_CALL_GRAMMAR_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/v1/types.pb.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema_compiler.h"

namespace llmc::typed_output {

// The grammar a ToolCallConstraint stands for, in its format's own syntax (docs/tool-calling.md):
// - REQUIRED: optional reasoning, then one call (more when `parallel`) of any tool, arguments per its schema;
// - NAMED: optional reasoning, then exactly one call of that tool;
// - AUTO: optional reasoning, then free text that never spells the call marker, then optionally the calls,
//   whose strict tools' arguments follow their schema (others any JSON object, or any parameters) — a lazy
//   grammar. Formats whose calls are the whole answer (llama3_json, pythonic) allow either the calls or text
//   that does not begin (after whitespace) with `{` / `[`. With `content` set, the answer is either the calls
//   or a sentence of `content`.
// The calls, with ARGS compact JSON per the tool's `parameters` (JsonSchemaOptions from the caller, `strict`
// from the tool), and a little whitespace (at most 4 of space, tab, \n, \r) marked WS:
//   hermes        <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>  (\n between calls) WS
//   qwen3_coder   <tool_call>\n<function=NAME>\n(<parameter=P>\nVALUE\n</parameter>\n)*</function>\n</tool_call>
//                 (\n between calls) WS; parameters in `properties` order, the required ones always; VALUE is
//                 raw text without "</parameter>" when the property's type is "string", JSON otherwise
//   llama3_json   {"name": "NAME", "parameters": ARGS} ("; " between calls)
//   pythonic      [NAME(P=JSON, ...)] (", " between calls and keywords; required keywords in `properties` order)
//   mistral       [TOOL_CALLS][{"name": "NAME", "arguments": ARGS}, ...] (one optional space before the "[")
//   deepseek_v3   <｜tool▁calls▁begin｜> then per call, an optional \n between calls,
//                 <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
//                 then <｜tool▁calls▁end｜>
//   deepseek_v31  the same with <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜> per call
// Reasoning (when reasoning_end is set): `start` TEXT `end` WS at the beginning, optional; with
// starts_in_reasoning, TEXT `end` WS is required. TEXT never contains `end`.
// INVALID_ARGUMENT for a schema that cannot be enforced ("tools[i].function.parameters: ..."), an unknown
// named tool, no function tools, tool_choice none or a format that cannot be constrained.
absl::StatusOr<grammar::Grammar> BuildToolCallGrammar(const v1::ToolCallConstraint& constraint,
                                                      const grammar::JsonSchemaOptions& json_options);

// Inserts `part`'s rules into `host` under fresh names and returns a reference to its root.
grammar::Expr EmbedGrammar(grammar::Grammar& host, const grammar::Grammar& part);

// Any UTF-8 text that does not contain `marker` (compared code point by code point), as rules added to
// `host`: the marker's KMP automaton, right-recursive, so the matcher's stacks do not grow with the text.
// The text may end anywhere short of the marker; the caller may put the marker after it.
grammar::Expr TextWithout(grammar::Grammar& host, std::string_view marker);

// Any UTF-8 text that does not begin with `marker` and whose first code point is not in `also_not_first`
// (the empty text included).
grammar::Expr TextNotStartingWith(std::string_view marker, const std::vector<grammar::CodePointRange>& also_not_first);

// Any UTF-8 text.
grammar::Expr AnyText();

}  // namespace llmc::typed_output

#endif  // LLMC_WORKER_TYPED_OUTPUT_TOOL_CALL_GRAMMAR_H_
