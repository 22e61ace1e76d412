#ifndef LLMC_WORKER_TYPED_OUTPUT_OUTPUT_PARSER_H_
#define LLMC_WORKER_TYPED_OUTPUT_OUTPUT_PARSER_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "worker/typed_output/output_format.h"

namespace llmc::typed_output {

// Reads one format's tool calls out of streamed content text. Text that is not a call is content; text that
// may begin a call marker is held back until it is known; a call is reported once it is complete and well
// formed (its first part carries a new id and the name, then its arguments as a JSON object's text); a
// malformed call comes back as content, never lost. Every format reports a call as exactly one ToolCallPart
// carrying index, id, name and the whole arguments (compact JSON object text); no second part has its index.
class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // Appends what `text` completes to out.content and out.tool_calls.
  virtual void Add(std::string_view text, TypedDelta& out) = 0;
  // At the end of the choice: everything held back (an unfinished call as content).
  virtual void Finish(TypedDelta& out) = 0;
  // Calls reported so far.
  virtual uint32_t num_calls() const = 0;
};

struct ToolCallParserOptions {
  std::vector<FunctionTool> tools;  // formats that type argument values (XML, pythonic) read the schemas
  uint64_t id_seed = 0;             // call ids are random from this seed (OpenAI "call_..." or Mistral's 9)
  // harmony, whose reasoning is a channel rather than marked text: false puts the analysis channel in content.
  bool separate_reasoning = true;
};

// The parser for `format`; kNone: a parser that passes all text through as content.
std::unique_ptr<ToolCallParser> MakeToolCallParser(ToolCallFormat format, ToolCallParserOptions options);

// One choice's parser: reasoning (between the markers, or from the start when the prompt opened the block)
// apart from the rest, and the rest through the tool-call parser. Cut short inside reasoning (max_tokens),
// what was generated stays reasoning.
class ChoiceOutputParser {
 public:
  ChoiceOutputParser(ReasoningMarkers reasoning, bool starts_in_reasoning, std::unique_ptr<ToolCallParser> tools);

  TypedDelta Add(std::string_view text);
  TypedDelta Finish();
  bool made_tool_calls() const { return tools_->num_calls() > 0; }

 private:
  void AddToContent(std::string_view text, TypedDelta& out);

  const ReasoningMarkers reasoning_;
  bool in_reasoning_;
  bool reasoning_seen_ = false;  // decided whether a block opens: the start marker is only read at the beginning
  bool skip_start_ = false;      // opened by the prompt: a start marker the model writes again is dropped
  bool drop_newlines_ = false;   // right after the end marker: newlines are not content
  std::string held_;             // a suffix that may begin the next marker
  std::unique_ptr<ToolCallParser> tools_;
};

}  // namespace llmc::typed_output

#endif  // LLMC_WORKER_TYPED_OUTPUT_OUTPUT_PARSER_H_
