#include "gateway/http/error_body.h"

#include "nlohmann/json.hpp"

namespace llmc::gateway {

std::string OpenAiErrorBody(absl::string_view message, absl::string_view type, absl::string_view code) {
  nlohmann::json error = {{"message", std::string(message)},
                          {"type", std::string(type)},
                          {"param", nullptr},
                          {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(code))}};
  // Replacing invalid UTF-8 keeps a client-supplied path in a message from turning into an exception.
  return nlohmann::json({{"error", error}}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace llmc::gateway
