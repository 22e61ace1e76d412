#include "tools/chat/chat_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tools/bench/sse_parser.h"
#include "tools/chat/http_exchange.h"

namespace llmc::chat {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBodyBytes = 64 << 10;

HttpExchangeRequest MakeRequest(const ServerConnection& server, std::string method, std::string path,
                                std::string body) {
  HttpExchangeRequest request;
  request.method = std::move(method);
  request.path = std::move(path);
  request.body = std::move(body);
  request.api_key = server.api_key;
  request.idle_timeout = server.idle_timeout;
  request.cancel_fd = server.cancel_fd;
  return request;
}

// Whether a 404 names an unknown model rather than an unknown path.
bool IsModelNotFound(absl::string_view body) {
  const nlohmann::json parsed = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return false;
  const auto error = parsed.find("error");
  return error != parsed.end() && error->is_object() && error->value("code", "") == "model_not_found";
}

// A non-200 answer as a status: UNAUTHENTICATED for 401, NOT_FOUND when the path does not exist.
absl::Status Refusal(const HttpExchangeRequest& request, const HttpAnswer& answer) {
  const std::string message = absl::StrCat(request.method, " ", request.path, " answered HTTP ", answer.status, ": ",
                                           bench::ErrorMessageFromBody(answer.body));
  if (answer.status == 401) return absl::UnauthenticatedError(message);
  if (answer.status == 403) return absl::PermissionDeniedError(message);
  if (answer.status == 404 && !IsModelNotFound(answer.body)) return absl::NotFoundError(message);
  return absl::FailedPreconditionError(message);
}

absl::StatusOr<std::string> FetchOk(const ServerConnection& server, const HttpExchangeRequest& request) {
  absl::StatusOr<HttpAnswer> answer = FetchHttp(server.url, request);
  if (!answer.ok()) return answer.status();
  if (answer->status != 200) return Refusal(request, *answer);
  return std::move(answer->body);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListModels(const ServerConnection& server) {
  absl::StatusOr<std::string> body = FetchOk(server, MakeRequest(server, "GET", bench::ModelsPath(server.url), ""));
  if (!body.ok()) return body.status();
  return ParseModelIds(*body);
}

absl::StatusOr<RenderedPrompt> RenderPrompt(const ServerConnection& server, const std::string& model,
                                            const std::vector<ChatMessage>& messages,
                                            const nlohmann::json& extra_body) {
  absl::StatusOr<std::string> tokenized =
      FetchOk(server, MakeRequest(server, "POST", ServerRootPath(server.url, "/tokenize"),
                                  BuildTokenizeBody(model, messages, extra_body)));
  if (!tokenized.ok()) return tokenized.status();
  absl::StatusOr<std::vector<int64_t>> tokens = ParseTokenizeAnswer(*tokenized);
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<std::string> detokenized = FetchOk(
      server,
      MakeRequest(server, "POST", ServerRootPath(server.url, "/detokenize"), BuildDetokenizeBody(model, *tokens)));
  if (!detokenized.ok()) return detokenized.status();
  absl::StatusOr<std::string> text = ParseDetokenizeAnswer(*detokenized);
  if (!text.ok()) return text.status();
  return RenderedPrompt{*std::move(text), static_cast<int64_t>(tokens->size())};
}

ReplyOutcome StreamReply(const ServerConnection& server, const ChatRequestOptions& options,
                         const std::vector<ChatMessage>& messages, const ReplyCallbacks& callbacks) {
  HttpExchangeRequest request =
      MakeRequest(server, "POST", bench::EndpointPath(server.url, "chat"), BuildChatRequestBody(options, messages));
  request.accept = "text/event-stream";
  ReplyOutcome outcome;
  int status = 0;
  std::string error_body;
  bench::SseParser sse;
  std::vector<std::string> events;
  std::string stream_error;
  int64_t deltas = 0;
  std::optional<int64_t> usage_tokens;
  const Clock::time_point start = Clock::now();

  auto on_event = [&](const std::string& data) {
    const bench::StreamChunk chunk = bench::InterpretChunk(data, /*chat=*/true);
    switch (chunk.kind) {
      case bench::StreamChunk::Kind::kDone:
        return;
      case bench::StreamChunk::Kind::kError:
      case bench::StreamChunk::Kind::kMalformed:
        if (stream_error.empty()) stream_error = chunk.error;
        return;
      case bench::StreamChunk::Kind::kData:
        break;
    }
    if (chunk.completion_tokens) usage_tokens = chunk.completion_tokens;
    if (chunk.text.empty()) return;
    if (!outcome.time_to_first_token) outcome.time_to_first_token = absl::FromChrono(Clock::now() - start);
    ++deltas;
    const absl::string_view content = absl::string_view(chunk.text).substr(chunk.reasoning.size());
    outcome.reasoning += chunk.reasoning;
    outcome.text.append(content.data(), content.size());
    if (!chunk.reasoning.empty() && callbacks.on_reasoning) callbacks.on_reasoning(chunk.reasoning);
    if (!content.empty() && callbacks.on_text) callbacks.on_text(content);
  };
  HttpExchangeCallbacks http_callbacks;
  http_callbacks.on_status = [&](int code) {
    status = code;
    if (code != 200) return;
    outcome.started = true;
    if (callbacks.on_start) callbacks.on_start();
  };
  http_callbacks.on_body = [&](absl::string_view bytes) {
    if (status != 200) {
      if (error_body.size() < kMaxErrorBodyBytes)
        absl::StrAppend(&error_body, bytes.substr(0, kMaxErrorBodyBytes - error_body.size()));
      return;
    }
    events.clear();
    if (!sse.Feed(bytes, events)) {
      if (stream_error.empty()) stream_error = "the event stream has a line too long to be server-sent events";
      return;
    }
    for (const std::string& event : events) on_event(event);
  };
  const absl::StatusOr<int> exchanged = ExchangeHttp(server.url, request, http_callbacks);
  outcome.elapsed = absl::FromChrono(Clock::now() - start);
  outcome.tokens = usage_tokens.value_or(deltas);
  if (absl::IsCancelled(exchanged.status())) {
    outcome.kind = ReplyOutcome::Kind::kInterrupted;
  } else if (!exchanged.ok()) {
    outcome.error = std::string(exchanged.status().message());
  } else if (status != 200) {
    outcome.error = absl::StrCat(bench::ErrorMessageFromBody(error_body), " (HTTP ", status, ")");
  } else if (!stream_error.empty()) {
    outcome.error = stream_error;
  } else {
    outcome.kind = ReplyOutcome::Kind::kCompleted;
  }
  return outcome;
}

}  // namespace llmc::chat
