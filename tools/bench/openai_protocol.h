#ifndef LLMC_TOOLS_BENCH_OPENAI_PROTOCOL_H_
#define LLMC_TOOLS_BENCH_OPENAI_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc::bench {

// Where requests go: http://host:port plus the path prefix of the API ("" or "/v1", say).
struct ServerUrl {
  std::string host;
  std::string port = "80";
  std::string prefix;  // without a trailing slash

  std::string HostHeader() const { return port == "80" ? host : host + ":" + port; }
};

// Parses "http://host[:port][/path]"; https and other schemes are refused.
absl::StatusOr<ServerUrl> ParseBaseUrl(const std::string& base_url);

// The request path: `endpoint` "chat" → /v1/chat/completions, "completions" → /v1/completions, both under
// the base URL's path (which may already end in /v1); a path starting with "/" is used as given.
std::string EndpointPath(const ServerUrl& url, const std::string& endpoint);
// The models listing under the same base: /v1/models.
std::string ModelsPath(const ServerUrl& url);

// Whether `endpoint` speaks the chat protocol (messages in, delta.content out).
bool IsChatEndpoint(const std::string& endpoint);

struct CompletionRequest {
  std::string model;
  std::string prompt;
  // A conversation so far as (role, content), before `prompt` (the next user message): chat sends them as
  // messages, completions as text before the prompt.
  std::vector<std::pair<std::string, std::string>> history;
  int64_t max_tokens = 16;
  bool chat = true;
  bool ignore_eos = false;
  double temperature = 0;
};

// A streaming request body: {"model", "messages" or "prompt", "max_tokens", "temperature", "stream": true,
// "stream_options": {"include_usage": true}} and "ignore_eos": true when asked.
std::string BuildRequestBody(const CompletionRequest& request);

// One parsed `data:` event of a completion stream.
struct StreamChunk {
  enum class Kind {
    kDone,       // data: [DONE]
    kError,      // an {"error": ...} event
    kMalformed,  // not JSON, or not an object
    kData,       // a chunk (with or without text and usage)
  };
  Kind kind = Kind::kMalformed;
  std::string text;       // generated text in it: choices[0].delta.content (or reasoning_content) / choices[0].text
  std::string reasoning;  // chat: the reasoning_content part of `text` (it comes first)
  std::optional<int64_t> completion_tokens;  // from a usage object
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> cached_tokens;  // usage.prompt_tokens_details.cached_tokens
  std::string error;                     // kError, kMalformed: what it said
};

StreamChunk InterpretChunk(absl::string_view data, bool chat);

// The message of an OpenAI error envelope {"error": {"message": ...}} or {"error": "..."}, else the body
// itself, cut to a readable length.
std::string ErrorMessageFromBody(absl::string_view body);

// The first model id of a GET /v1/models answer.
absl::StatusOr<std::string> FirstModelId(absl::string_view body);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_OPENAI_PROTOCOL_H_
