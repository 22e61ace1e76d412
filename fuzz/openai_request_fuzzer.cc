// Fuzzes the gateway's OpenAI request parsing (chat, completions and the Responses API's translation to
// chat). Any body either parses into a worker request that respects the limits, or is INVALID_ARGUMENT with
// a message; nothing throws. A Responses request has one choice, and its errors name the client's field
// (a param, unless the body itself is not a JSON object), never a field of the chat body it was translated to
// (messages, max_completion_tokens, response_format).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/request_limits.h"
#include "common/utf8.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_request.h"
#include "gateway/openai/responses_request.h"

namespace {

[[noreturn]] void Fail(const char* what, std::string_view body) {
  std::cerr << what << "\nbody: " << body << "\n";
  std::abort();
}

void CheckError(const absl::Status& status, std::string_view body) {
  if (status.code() != absl::StatusCode::kInvalidArgument) Fail("error is not INVALID_ARGUMENT", body);
  if (status.message().empty()) Fail("error without a message", body);
}

void CheckRequest(const llmc::gateway::OpenAiRequest& request, std::string_view body) {
  if (request.num_choices() < 1) Fail("no choices", body);
  if (llmc::FindInvalidUtf8(request.generate.model()).has_value()) Fail("model is not UTF-8", body);
  const auto& sampling = request.generate.sampling();
  namespace limits = llmc::limits;
  if (sampling.has_temperature() && !limits::kTemperature.Contains(sampling.temperature())) {
    Fail("temperature out of range", body);
  }
  if (sampling.has_top_p() && !limits::kTopP.Contains(sampling.top_p())) Fail("top_p out of range", body);
  if (request.num_choices() > limits::kMaxChoices) Fail("too many choices", body);
  if (request.top_logprobs > limits::kMaxTopLogprobs) Fail("too many top_logprobs", body);
}

void Check(const absl::StatusOr<llmc::gateway::OpenAiRequest>& parsed, std::string_view body) {
  if (parsed.ok()) {
    CheckRequest(*parsed, body);
  } else {
    CheckError(parsed.status(), body);
  }
}

void CheckResponses(const absl::StatusOr<llmc::gateway::ResponsesRequest>& parsed, std::string_view body) {
  if (parsed.ok()) {
    CheckRequest(parsed->chat, body);
    if (parsed->chat.num_choices() != 1) Fail("a Responses request with other than one choice", body);
    if (!parsed->echo.is_object()) Fail("the Responses echo is not an object", body);
    return;
  }
  CheckError(parsed.status(), body);
  const std::string param = llmc::gateway::ParameterOf(parsed.status());
  if (param.empty()) {
    if (llmc::gateway::ParseRequestBody(body).ok()) Fail("a Responses error without a param", body);
    return;
  }
  for (const char* chat_only : {"messages", "max_completion_tokens", "response_format"}) {
    if (absl::StartsWith(param, chat_only)) Fail("a Responses error names a chat field", body);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Check(llmc::gateway::ParseChatCompletionRequest(body), body);
  Check(llmc::gateway::ParseCompletionRequest(body), body);
  CheckResponses(llmc::gateway::ParseResponsesRequest(body), body);
  return 0;
}
