#ifndef LLMC_TOOLS_CHAT_CHAT_PROTOCOL_H_
#define LLMC_TOOLS_CHAT_CHAT_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tools/bench/openai_protocol.h"

namespace llmc::chat {

// The OpenAI chat request and answer shapes llmc-chat needs beyond those tools/bench has.

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

struct ChatRequestOptions {
  std::string model;
  double temperature = 0.7;
  int64_t max_tokens = 0;                                // 0: left to the server
  nlohmann::json extra_body = nlohmann::json::object();  // merged into the body last, so it wins
};

// {"model", "messages", "temperature", "max_tokens" (when set), "stream": true,
//  "stream_options": {"include_usage": true}} with `extra_body`'s keys on top.
std::string BuildChatRequestBody(const ChatRequestOptions& options, const std::vector<ChatMessage>& messages);

// --extra_body: a JSON object (empty text: none).
absl::StatusOr<nlohmann::json> ParseExtraBody(const std::string& text);

// Every model id of a GET /v1/models answer, in its order.
absl::StatusOr<std::vector<std::string>> ParseModelIds(absl::string_view body);

// A path beside the API rather than under it, as vLLM serves /tokenize: the base URL's path without its /v1.
std::string ServerRootPath(const bench::ServerUrl& url, absl::string_view endpoint);

// vLLM's POST /tokenize body for a conversation, and the answers of /tokenize and /detokenize.
// `extra_body` (--extra_body) contributes the fields that change how the server renders the chat.
std::string BuildTokenizeBody(const std::string& model, const std::vector<ChatMessage>& messages,
                              const nlohmann::json& extra_body = nlohmann::json::object());
absl::StatusOr<std::vector<int64_t>> ParseTokenizeAnswer(absl::string_view body);
std::string BuildDetokenizeBody(const std::string& model, const std::vector<int64_t>& tokens);
absl::StatusOr<std::string> ParseDetokenizeAnswer(absl::string_view body);

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_CHAT_PROTOCOL_H_
