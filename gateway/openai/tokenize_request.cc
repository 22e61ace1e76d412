#include "gateway/openai/tokenize_request.h"

#include <optional>
#include <vector>

#include "common/status_macros.h"
#include "gateway/openai/chat_input.h"
#include "gateway/openai/json_fields.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_request.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {
namespace {

using nlohmann::json;

absl::StatusOr<std::string> ReadModel(const FieldReader& fields) {
  ASSIGN_OR_RETURN(const std::optional<std::string> model, fields.String("model"));
  return model.value_or("");
}

}  // namespace

absl::StatusOr<v1::TokenizeRequest> ParseTokenizeRequest(std::string_view body) {
  ASSIGN_OR_RETURN(const json parsed, ParseRequestBody(body));
  const FieldReader fields(parsed);
  v1::TokenizeRequest request;
  ASSIGN_OR_RETURN(*request.mutable_model(), ReadModel(fields));
  const bool has_prompt = fields.Find("prompt") != nullptr;
  const bool has_messages = fields.Find("messages") != nullptr;
  if (has_prompt == has_messages) {
    return InvalidParameter(has_prompt ? "messages" : "prompt",
                            "give either 'prompt' (text) or 'messages' (a conversation), not both or neither");
  }
  if (has_prompt) {
    ASSIGN_OR_RETURN(const std::optional<std::string> prompt, fields.String("prompt"));
    request.set_text(*prompt);
  } else {
    // Parsed again keeping the client's key order, which a chat template's tojson shows.
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body.begin(), body.end());
    RETURN_IF_ERROR(ParseChatInput(parsed, ordered, *request.mutable_chat()));
    ASSIGN_OR_RETURN(const std::optional<bool> continue_final, fields.Bool("continue_final_message"));
    if (continue_final.value_or(false)) {
      return InvalidParameter("continue_final_message", "'continue_final_message' is not supported by this server");
    }
  }
  ASSIGN_OR_RETURN(const std::optional<bool> add_special_tokens, fields.Bool("add_special_tokens"));
  if (add_special_tokens.has_value()) request.set_add_special_tokens(*add_special_tokens);
  ASSIGN_OR_RETURN(const std::optional<bool> token_strs, fields.Bool("return_token_strs"));
  if (token_strs.value_or(false)) {
    return InvalidParameter("return_token_strs", "'return_token_strs' is not supported by this server");
  }
  return request;
}

absl::StatusOr<v1::DetokenizeRequest> ParseDetokenizeRequest(std::string_view body) {
  ASSIGN_OR_RETURN(const json parsed, ParseRequestBody(body));
  const FieldReader fields(parsed);
  v1::DetokenizeRequest request;
  ASSIGN_OR_RETURN(*request.mutable_model(), ReadModel(fields));
  const json* tokens = fields.Find("tokens");
  if (tokens == nullptr) return InvalidParameter("tokens", "'tokens' is required");
  if (!tokens->is_array()) return fields.WrongType("tokens", *tokens, "an array of token ids");
  if (!tokens->empty()) {
    ASSIGN_OR_RETURN(const std::vector<int32_t> ids, ReadTokenIds(*tokens, "tokens"));
    request.mutable_token_ids()->Add(ids.begin(), ids.end());
  }
  // vLLM decodes everything it is given, special tokens included.
  request.set_skip_special_tokens(false);
  return request;
}

std::string TokenizeResponseJson(const v1::TokenizeResponse& response) {
  nlohmann::ordered_json out{{"count", response.count()},
                             {"max_model_len", response.max_context_length()},
                             {"tokens", std::vector<int32_t>(response.token_ids().begin(), response.token_ids().end())},
                             {"token_strs", nullptr}};
  return DumpJson(out);
}

std::string DetokenizeResponseJson(const v1::DetokenizeResponse& response) {
  return DumpJson(nlohmann::ordered_json{{"prompt", response.text()}});
}

}  // namespace llmc::gateway
