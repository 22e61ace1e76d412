// Fuzzes the gateway's OpenAI request parsing (chat and completions). Any body either parses into a
// worker request that respects the limits, or is INVALID_ARGUMENT with a message; nothing throws.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "absl/status/status.h"
#include "common/request_limits.h"
#include "common/utf8.h"
#include "gateway/openai/openai_request.h"

namespace {

[[noreturn]] void Fail(const char* what, std::string_view body) {
  std::cerr << what << "\nbody: " << body << "\n";
  std::abort();
}

void Check(const absl::StatusOr<llmc::gateway::OpenAiRequest>& parsed, std::string_view body) {
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument) Fail("error is not INVALID_ARGUMENT", body);
    if (parsed.status().message().empty()) Fail("error without a message", body);
    return;
  }
  const llmc::gateway::OpenAiRequest& request = *parsed;
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Check(llmc::gateway::ParseChatCompletionRequest(body), body);
  Check(llmc::gateway::ParseCompletionRequest(body), body);
  return 0;
}
