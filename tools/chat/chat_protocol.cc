#include "tools/chat/chat_protocol.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace llmc::chat {
namespace {

using nlohmann::json;

json MessagesJson(const std::vector<ChatMessage>& messages) {
  json array = json::array();
  for (const ChatMessage& message : messages) array.push_back({{"role", message.role}, {"content", message.content}});
  return array;
}

std::string Dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// The JSON object in `body`, or an error quoting the start of what came instead.
absl::StatusOr<json> ParseObject(absl::string_view body, absl::string_view what) {
  json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected ", what, " answer: ", body.substr(0, 200)));
  }
  return parsed;
}

}  // namespace

std::string BuildChatRequestBody(const ChatRequestOptions& options, const std::vector<ChatMessage>& messages) {
  json body = {{"model", options.model},
               {"messages", MessagesJson(messages)},
               {"temperature", options.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (options.max_tokens > 0) body["max_tokens"] = options.max_tokens;
  if (options.extra_body.is_object()) body.update(options.extra_body);
  return Dump(body);
}

absl::StatusOr<json> ParseExtraBody(const std::string& text) {
  if (absl::StripAsciiWhitespace(text).empty()) return json::object();
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--extra_body must be a JSON object such as '{\"ignore_eos\": true}', got '", text, "'"));
  }
  return parsed;
}

absl::StatusOr<std::vector<std::string>> ParseModelIds(absl::string_view body) {
  absl::StatusOr<json> parsed = ParseObject(body, "/v1/models");
  if (!parsed.ok()) return parsed.status();
  const auto data = parsed->find("data");
  if (data == parsed->end() || !data->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected /v1/models answer: ", body.substr(0, 200)));
  }
  std::vector<std::string> ids;
  for (const json& model : *data) {
    if (model.is_object() && model.contains("id") && model["id"].is_string()) ids.push_back(model["id"]);
  }
  return ids;
}

std::string ServerRootPath(const bench::ServerUrl& url, absl::string_view endpoint) {
  absl::string_view root = url.prefix;
  absl::ConsumeSuffix(&root, "/v1");
  return absl::StrCat(root, endpoint);
}

std::string BuildTokenizeBody(const std::string& model, const std::vector<ChatMessage>& messages,
                              const json& extra_body) {
  json body = {{"model", model}, {"messages", MessagesJson(messages)}};
  // The request's own template settings change the rendering, so /tokenize must see them too.
  for (const char* key : {"chat_template", "chat_template_kwargs", "add_generation_prompt", "tools"}) {
    if (extra_body.is_object() && extra_body.contains(key)) body[key] = extra_body[key];
  }
  return Dump(body);
}

absl::StatusOr<std::vector<int64_t>> ParseTokenizeAnswer(absl::string_view body) {
  absl::StatusOr<json> parsed = ParseObject(body, "/tokenize");
  if (!parsed.ok()) return parsed.status();
  const auto tokens = parsed->find("tokens");
  if (tokens == parsed->end() || !tokens->is_array()) {
    return absl::InvalidArgumentError("the /tokenize answer has no \"tokens\" list");
  }
  std::vector<int64_t> ids;
  for (const json& token : *tokens) {
    if (!token.is_number_integer()) return absl::InvalidArgumentError("the /tokenize answer has a non-integer token");
    ids.push_back(token.get<int64_t>());
  }
  return ids;
}

std::string BuildDetokenizeBody(const std::string& model, const std::vector<int64_t>& tokens) {
  return Dump({{"model", model}, {"tokens", tokens}});
}

absl::StatusOr<std::string> ParseDetokenizeAnswer(absl::string_view body) {
  absl::StatusOr<json> parsed = ParseObject(body, "/detokenize");
  if (!parsed.ok()) return parsed.status();
  const auto prompt = parsed->find("prompt");
  if (prompt == parsed->end() || !prompt->is_string()) {
    return absl::InvalidArgumentError("the /detokenize answer has no \"prompt\" text");
  }
  return prompt->get<std::string>();
}

}  // namespace llmc::chat
