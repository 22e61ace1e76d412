#ifndef LLMC_GATEWAY_OPENAI_CHAT_INPUT_H_
#define LLMC_GATEWAY_OPENAI_CHAT_INPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "llmc/v1/worker.pb.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

// Reads the chat fields of a chat completion body into `chat`: `messages` (roles, content as a string or
// text parts, tool calls and results), `tools` and `tool_choice`, `add_generation_prompt`,
// `chat_template` and `chat_template_kwargs`. `body` is checked field by field; the JSON the worker's
// template sees comes from `ordered_body`, the same body with its keys in the order the client wrote
// them, so a template's `tojson` prints a tool's schema as the client sent it.
// `tool_positions`, when given, gets each forwarded function tool's index in the client's `tools`.
absl::Status ParseChatInput(const nlohmann::json& body, const nlohmann::ordered_json& ordered_body, v1::ChatInput& chat,
                            std::vector<uint32_t>* tool_positions = nullptr);

// A reasoning effort (chat completions' `reasoning_effort`, the Responses API's `reasoning.effort`, named `param`
// in errors) as the chat template reads it, into `kwargs`: "none" and "minimal" turn thinking off (enable_thinking
// false, as Qwen3's and similar templates read it); "low", "medium" and "high" become reasoning_effort (as GPT-OSS's
// harmony template reads it), "xhigh" as "high". Templates ignore variables they do not use.
absl::Status AddReasoningEffort(const std::string& effort, const std::string& param, nlohmann::ordered_json& kwargs);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_CHAT_INPUT_H_
