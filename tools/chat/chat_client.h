#ifndef LLMC_TOOLS_CHAT_CHAT_CLIENT_H_
#define LLMC_TOOLS_CHAT_CHAT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/bench/openai_protocol.h"
#include "tools/chat/chat_protocol.h"

namespace llmc::chat {

// Where requests go and how: one per session.
struct ServerConnection {
  bench::ServerUrl url;
  std::string api_key;
  absl::Duration idle_timeout = absl::Seconds(300);
  int cancel_fd = -1;  // InterruptSignal::fd(): Ctrl-C ends the request in flight
};

// The model ids GET /v1/models lists. A refusal (401, say) is an error with the server's message.
absl::StatusOr<std::vector<std::string>> ListModels(const ServerConnection& server);

struct RenderedPrompt {
  std::string text;
  int64_t tokens = 0;
};

// The conversation as the server renders and tokenizes it (vLLM's POST /tokenize, then /detokenize).
// NOT_FOUND when the server has no /tokenize.
// `extra_body`'s template fields (chat_template, chat_template_kwargs, ...) go along, as in the chat request.
absl::StatusOr<RenderedPrompt> RenderPrompt(const ServerConnection& server, const std::string& model,
                                            const std::vector<ChatMessage>& messages, const nlohmann::json& extra_body);

struct ReplyOutcome {
  enum class Kind { kCompleted, kInterrupted, kFailed };
  Kind kind = Kind::kFailed;
  std::string text;       // the content that streamed in, also when interrupted or failed midway
  std::string reasoning;  // the reasoning that streamed in apart from the content (reasoning models)
  std::string error;      // kFailed: the server's message, or why the connection failed
  bool started = false;   // the server accepted the request and began streaming
  int64_t tokens = 0;     // usage.completion_tokens of the last chunk, else the number of text deltas
  std::optional<absl::Duration> time_to_first_token;
  absl::Duration elapsed;
};

struct ReplyCallbacks {
  std::function<void()> on_start;                            // the answer is a 200 stream
  std::function<void(absl::string_view text)> on_text;       // each content delta as it arrives
  std::function<void(absl::string_view text)> on_reasoning;  // each reasoning delta as it arrives
};

// POST /v1/chat/completions with stream: true for `messages`, handing deltas over as they arrive.
ReplyOutcome StreamReply(const ServerConnection& server, const ChatRequestOptions& options,
                         const std::vector<ChatMessage>& messages, const ReplyCallbacks& callbacks);

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_CHAT_CLIENT_H_
