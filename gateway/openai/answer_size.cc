#include "gateway/openai/answer_size.h"

#include "absl/strings/str_cat.h"
#include "gateway/openai/openai_error.h"

namespace llmc::gateway {
namespace {

// Chat: {"token":"","logprob":0,"bytes":[],"top_logprobs":[]} and a comma, per token; each alternative
// {"token":"","logprob":0,"bytes":[]} and a comma.
constexpr uint64_t kLeastChatEntryBytes = 54;
constexpr uint64_t kLeastChatAlternativeBytes = 36;
// Completions: "" in tokens, 0 in token_logprobs, {"":0} in top_logprobs (alternatives sharing a text share
// a key, so they may add nothing) and 0 in text_offset, each with a comma.
constexpr uint64_t kLeastCompletionEntryBytes = 16;

uint64_t LeastBytesPerToken(const OpenAiRequest& request) {
  if (!request.logprobs) return 0;
  if (request.kind == OpenAiKind::kCompletion) return kLeastCompletionEntryBytes;
  return kLeastChatEntryBytes + request.top_logprobs * kLeastChatAlternativeBytes;
}

}  // namespace

uint64_t LeastAnswerBytes(const OpenAiRequest& request) {
  uint64_t bytes = 0;
  if (request.generate.sampling().has_max_tokens()) {
    bytes += uint64_t{request.total_choices()} * request.generate.sampling().max_tokens() * LeastBytesPerToken(request);
  }
  for (const std::string& echo : request.echo_texts) bytes += uint64_t{request.num_choices()} * echo.size();
  return bytes;
}

absl::Status CheckAnswerCanFit(const OpenAiRequest& request, uint64_t max_response_bytes) {
  if (request.stream) return absl::OkStatus();
  const uint64_t least = LeastAnswerBytes(request);
  if (least <= max_response_bytes) return absl::OkStatus();
  return InvalidParameter(
      request.echo_texts.empty() ? "max_tokens" : "echo",
      absl::StrCat("a non-streamed answer of ", request.total_choices(), " choice(s) of up to ",
                   request.generate.sampling().max_tokens(), " tokens",
                   request.logprobs ? absl::StrCat(" with logprobs (", request.top_logprobs, " alternatives)") : "",
                   request.echo_texts.empty() ? "" : " echoing the prompt", " takes at least ", least,
                   " bytes, more than this server's limit of ", max_response_bytes,
                   " bytes for a non-streamed answer; lower max_tokens, n or the logprobs asked for, or set "
                   "'stream': true"));
}

absl::Status AnswerTooLarge(size_t bytes, uint64_t max_response_bytes) {
  return InvalidParameter(
      "max_tokens",
      absl::StrCat("the answer grew to ", bytes, " bytes, past this server's limit of ", max_response_bytes,
                   " bytes for a non-streamed answer; lower max_tokens, n or the logprobs asked "
                   "for, or set 'stream': true"));
}

}  // namespace llmc::gateway
