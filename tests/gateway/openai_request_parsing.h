#ifndef LLMC_TESTS_GATEWAY_OPENAI_REQUEST_PARSING_H_
#define LLMC_TESTS_GATEWAY_OPENAI_REQUEST_PARSING_H_

// Request bodies and checks shared by the OpenAI request parsing tests.
#include <string>

#include "absl/status/statusor.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_request.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"

namespace llmc::gateway {

// A minimal valid body, with `extra` fields set over it.
inline nlohmann::json ChatBody(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json body = {{"model", "qwen"},
                         {"messages", nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (const auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

inline nlohmann::json CompletionBody(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json body = {{"model", "qwen"}, {"prompt", "Once upon a time"}};
  for (const auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

inline absl::StatusOr<OpenAiRequest> Chat(const nlohmann::json& extra = nlohmann::json::object()) {
  return ParseChatCompletionRequest(ChatBody(extra).dump());
}

inline absl::StatusOr<OpenAiRequest> Completion(const nlohmann::json& extra = nlohmann::json::object()) {
  return ParseCompletionRequest(CompletionBody(extra).dump());
}

// A 400 invalid-parameter error naming `param`, its message containing `fragment`.
inline void ExpectInvalid(const absl::StatusOr<OpenAiRequest>& result, const std::string& param,
                          const std::string& fragment = "") {
  REQUIRE_FALSE(result.ok());
  INFO(result.status().ToString());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParameterOf(result.status()) == param);
  CHECK(HttpStatusOf(result.status()) == 400);
  if (!fragment.empty()) CHECK_THAT(std::string(result.status().message()), Catch::Contains(fragment));
}

}  // namespace llmc::gateway

#endif  // LLMC_TESTS_GATEWAY_OPENAI_REQUEST_PARSING_H_
