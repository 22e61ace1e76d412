#ifndef LLMC_GATEWAY_OPENAI_RESPONSES_REQUEST_H_
#define LLMC_GATEWAY_OPENAI_RESPONSES_REQUEST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gateway/openai/openai_request.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

// Where the parts of the Chat Completions body built from a Responses body came from, so that an error the
// chat parser (or a worker) reports names the field the client sent.
struct ResponsesParamMap {
  // Chat messages[i] came from this Responses field: "instructions", "input" (a string input) or "input[k]".
  std::vector<std::string> message_sources;
  // The tool calls of chat messages[i] came from these Responses items ("input[k]", one function_call each).
  std::vector<std::vector<std::string>> call_sources;
  // Chat tools[i] came from Responses tools[tool_sources[i]] (the tools of other types are left out).
  std::vector<size_t> tool_sources;
  // The chat body's chat_template_kwargs came only from `reasoning.effort`.
  bool kwargs_from_reasoning = false;

  // The Responses field a chat body's parameter stands for: "max_completion_tokens" → "max_output_tokens",
  // "messages[2].content[0].text" → "input[1].content[0].text", "response_format.json_schema.schema" →
  // "text.format.schema", "tools[0].function.name" → "tools[3].name", ...; others unchanged.
  std::string ToResponses(std::string_view chat_param) const;
  // An INVALID_ARGUMENT naming a chat parameter, renamed by ToResponses (its param, and the name where the
  // message mentions it); any other status unchanged.
  absl::Status Translate(absl::Status status) const;
};

// A POST /v1/responses body as the Chat Completions body it is served as.
struct ResponsesTranslation {
  nlohmann::ordered_json chat_body;
  // The request fields the `response` object repeats, in the Responses shape and in its key order
  // (instructions, max_output_tokens, ..., user, metadata).
  nlohmann::ordered_json echo;
  ResponsesParamMap params;
};

// Checks the Responses-only parts of the body (input items, instructions, tools, tool_choice, text.format,
// reasoning, metadata, and the stateful fields this stateless server refuses: store: true,
// previous_response_id, conversation, background: true, prompt, truncation: "auto", ...) and writes the
// equivalent chat body. The shared parameters (model, temperature, top_p, stream, user, and the llmc/vLLM
// sampling extensions) are copied over as they are, for ParseChatCompletionRequest to check. Errors are
// INVALID_ARGUMENT naming the client's field (e.g. "input[2].content").
absl::StatusOr<ResponsesTranslation> TranslateResponsesBody(std::string_view body);

// A validated POST /v1/responses request.
struct ResponsesRequest {
  OpenAiRequest chat;  // the translated body as a chat request (one choice)
  nlohmann::ordered_json echo;
  ResponsesParamMap params;
};

// TranslateResponsesBody, then ParseChatCompletionRequest on the chat body, its errors renamed to the
// Responses fields.
absl::StatusOr<ResponsesRequest> ParseResponsesRequest(std::string_view body);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_RESPONSES_REQUEST_H_
