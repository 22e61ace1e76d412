#ifndef LLMC_WORKER_TYPED_OUTPUT_OUTPUT_FORMAT_H_
#define LLMC_WORKER_TYPED_OUTPUT_OUTPUT_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace llmc::typed_output {

// How a model writes tool calls (docs/tool-calling.md). Names are vLLM's tool-parser names where one exists.
enum class ToolCallFormat {
  kNone,           // "none": the model has no tool-call format; its text is content
  kHermes,         // "hermes": <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen2.5, Qwen3, QwQ, Hermes)
  kQwen3CoderXml,  // "qwen3_coder": <tool_call><function=f><parameter=p>value</parameter></function></tool_call>
  kLlama3Json,     // "llama3_json": [<|python_tag|>]{"name": ..., "parameters"|"arguments": {...}} [; ...]
  kPythonic,       // "pythonic": [f(a=1), g(b="x")] (Llama 3.2/4 pythonic templates)
  kMistral,        // "mistral": [TOOL_CALLS][{"name":...,"arguments":{...}}] or [TOOL_CALLS]f[ARGS]{...}
  kDeepSeekV3,     // "deepseek_v3":
                // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```...
  kDeepSeekV31,  // "deepseek_v31":
                 // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
  kHarmony,  // "harmony" (gpt-oss): channels; analysis is reasoning, a message to=functions.f a call, final
             // content: <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
};

std::string_view ToolCallFormatName(ToolCallFormat format);
// INVALID_ARGUMENT listing the known names for anything else.
absl::StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name);

// The marker strings `format` writes around calls (for keeping special tokens decoded while parsing).
std::vector<std::string> ToolCallMarkers(ToolCallFormat format);

// Reasoning markers: the model writes its reasoning between `start` and `end` (DeepSeek-R1, Qwen3, QwQ:
// <think>...</think>). Both empty: the model does not reason apart.
struct ReasoningMarkers {
  std::string start;
  std::string end;
  bool enabled() const { return !end.empty(); }
};

// A request's function tools, read from its `tools` JSON (entries of another type are skipped).
struct FunctionTool {
  std::string name;
  nlohmann::ordered_json parameters;  // the JSON schema of the arguments; {} when absent
  bool strict = false;
};
// INVALID_ARGUMENT for malformed JSON or a function without a name.
absl::StatusOr<std::vector<FunctionTool>> ReadFunctionTools(std::string_view tools_json);

// One call's part, as the proto's ToolCallDelta: the first delta of an index carries id and name.
struct ToolCallPart {
  uint32_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

// What a piece of generated text is, once parsed.
struct TypedDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallPart> tool_calls;

  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  void Append(TypedDelta other);
};

}  // namespace llmc::typed_output

#endif  // LLMC_WORKER_TYPED_OUTPUT_OUTPUT_FORMAT_H_
