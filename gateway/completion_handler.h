#ifndef LLMC_GATEWAY_COMPLETION_HANDLER_H_
#define LLMC_GATEWAY_COMPLETION_HANDLER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "common/bounded_executor.h"
#include "gateway/dispatch/generation_dispatcher.h"
#include "gateway/gateway_metrics.h"
#include "gateway/http/http_handler.h"
#include "gateway/openai/answer_shaper.h"
#include "gateway/openai/openai_request.h"

namespace llmc::gateway {

// POST /v1/chat/completions, /v1/completions and /v1/responses: parse and validate the OpenAI body, dispatch
// the generation to a worker, and answer with one JSON body or an SSE stream, in the shape an AnswerShaper
// gives it (a Responses request runs as the chat request it translates to). Headers of a stream are sent
// with the first generated token, so a refusal before it (queue full everywhere, unknown model, prompt too
// long) still gets its proper HTTP status; errors after it arrive as the API's error event(s) (chat: the
// error envelope before `data: [DONE]`; Responses: response.failed).
class CompletionHandler {
 public:
  struct Options {
    absl::Duration request_timeout = absl::Seconds(600);
    uint32_t retry_after_seconds = 1;
    std::string system_fingerprint;
    // Prefix-cache salts per API key (config cache_salt_per_api_key): cache_salt.h.
    bool cache_salt_per_api_key = false;
    // The largest non-streamed answer held for one request (config max_response_bytes): answer_size.h.
    uint64_t max_response_bytes = 128ull << 20;
  };

  // `large_bodies` parses bodies beyond kInlineParseBytes, off the I/O thread.
  CompletionHandler(GenerationDispatcher& dispatcher, GatewayMetrics& metrics, BoundedExecutor& large_bodies,
                    Options options)
      : dispatcher_(dispatcher), metrics_(metrics), large_bodies_(large_bodies), options_(std::move(options)) {}

  // Bodies up to this size are parsed on the I/O thread that read them; a larger one (a long prompt, a
  // long conversation) would hold up every other stream of that thread for the milliseconds its UTF-8
  // check and JSON parse take, so it goes to `large_bodies`, and when that is full the answer is 429.
  static constexpr size_t kInlineParseBytes = 64 * 1024;

  void Handle(OpenAiKind kind, const HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
  // POST /v1/responses (stateless): gateway/openai/responses_request.h and responses_output.h.
  void HandleResponses(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer);

 private:
  void ParseAndDispatch(OpenAiKind kind, std::string_view body, const std::string& key_salt,
                        std::shared_ptr<ResponseWriter> writer);
  // With cache_salt_per_api_key: the request's API key part of its cache salt (ApiKeySaltPart); else "".
  std::string KeySaltOf(const HttpRequest& request) const;
  // Runs `parsed`'s generations (its generate requests are moved out) and answers through `shaper`.
  void Dispatch(OpenAiRequest& parsed, const std::string& key_salt, std::unique_ptr<AnswerShaper> shaper,
                std::shared_ptr<ResponseWriter> writer);

  GenerationDispatcher& dispatcher_;
  GatewayMetrics& metrics_;
  BoundedExecutor& large_bodies_;
  const Options options_;
};

// An error answer in the OpenAI envelope, with Retry-After on 429 and 503.
void SendError(ResponseWriter& writer, const absl::Status& status, uint32_t retry_after_seconds);

// Runs `parse` on the request's body: on this (I/O) thread for a body up to
// CompletionHandler::kInlineParseBytes, else on `large_bodies`, answering 429 when that is full.
void WithBody(BoundedExecutor& large_bodies, const HttpRequest& request, std::shared_ptr<ResponseWriter> writer,
              uint32_t retry_after_seconds,
              std::function<void(std::string_view body, std::shared_ptr<ResponseWriter> writer)> parse);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_COMPLETION_HANDLER_H_
