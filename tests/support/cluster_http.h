#ifndef LLMC_TESTS_SUPPORT_CLUSTER_HTTP_H_
#define LLMC_TESTS_SUPPORT_CLUSTER_HTTP_H_

// What the integration tests that talk HTTP to a real gateway share: the chat route, the short context some
// give their workers, and parsing an answer's JSON.
#include <string>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"

namespace llmc::testing {

inline constexpr char kChatPath[] = "/v1/chat/completions";

// The --max_model_len of workers whose context a test's requests overflow.
inline constexpr int kShortContext = 256;

// `text` as JSON; fails the test, showing the text, when it is not JSON.
inline nlohmann::json ParseJson(const std::string& text) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  INFO("not JSON: " << text);
  REQUIRE(!parsed.is_discarded());
  return parsed;
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CLUSTER_HTTP_H_
