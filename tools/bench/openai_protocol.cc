#include "tools/bench/openai_protocol.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace llmc::bench {
namespace {

using nlohmann::json;

std::string Shorten(absl::string_view text, size_t limit = 300) {
  std::string out(absl::StripAsciiWhitespace(text));
  if (out.size() > limit) out = absl::StrCat(out.substr(0, limit), "...");
  return out;
}

std::string ErrorMessageFromJson(const json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object()) {
    if (auto message = error.find("message"); message != error.end() && message->is_string()) {
      return message->get<std::string>();
    }
  }
  return error.dump();
}

}  // namespace

absl::StatusOr<ServerUrl> ParseBaseUrl(const std::string& base_url) {
  absl::string_view rest = base_url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("base URL must start with http:// (TLS is not supported): '", base_url, "'"));
  }
  ServerUrl url;
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path = slash == absl::string_view::npos ? absl::string_view() : rest.substr(slash);
  if (absl::StartsWith(authority, "[")) {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("base URL: unclosed [ in the host");
    url.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (absl::ConsumePrefix(&authority, ":")) url.port = std::string(authority);
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) url.port = std::string(authority.substr(colon + 1));
  }
  int port = 0;
  if (url.host.empty()) return absl::InvalidArgumentError(absl::StrCat("base URL has no host: '", base_url, "'"));
  if (!absl::SimpleAtoi(url.port, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("base URL has a bad port: '", base_url, "'"));
  }
  while (absl::ConsumeSuffix(&path, "/")) {
  }
  url.prefix = std::string(path);
  return url;
}

std::string EndpointPath(const ServerUrl& url, const std::string& endpoint) {
  if (absl::StartsWith(endpoint, "/")) return endpoint;
  const std::string base = absl::EndsWith(url.prefix, "/v1") ? url.prefix : absl::StrCat(url.prefix, "/v1");
  return absl::StrCat(base, endpoint == "chat" ? "/chat/completions" : "/completions");
}

std::string ModelsPath(const ServerUrl& url) {
  const std::string base = absl::EndsWith(url.prefix, "/v1") ? url.prefix : absl::StrCat(url.prefix, "/v1");
  return absl::StrCat(base, "/models");
}

bool IsChatEndpoint(const std::string& endpoint) {
  return endpoint == "chat" || absl::StrContains(endpoint, "chat/completions");
}

std::string BuildRequestBody(const CompletionRequest& request) {
  json body = {{"model", request.model},
               {"max_tokens", request.max_tokens},
               {"temperature", request.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (request.chat) {
    json messages = json::array();
    for (const auto& [role, content] : request.history) messages.push_back({{"role", role}, {"content", content}});
    messages.push_back({{"role", "user"}, {"content", request.prompt}});
    body["messages"] = std::move(messages);
  } else {
    std::string prompt;
    for (const auto& [role, content] : request.history) prompt += content;
    body["prompt"] = prompt + request.prompt;
  }
  if (request.ignore_eos) body["ignore_eos"] = true;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

StreamChunk InterpretChunk(absl::string_view data, bool chat) {
  StreamChunk chunk;
  if (absl::StripAsciiWhitespace(data) == "[DONE]") {
    chunk.kind = StreamChunk::Kind::kDone;
    return chunk;
  }
  const json parsed = json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    chunk.error = absl::StrCat("malformed event: ", Shorten(data));
    return chunk;
  }
  if (auto error = parsed.find("error"); error != parsed.end() && !error->is_null()) {
    chunk.kind = StreamChunk::Kind::kError;
    chunk.error = Shorten(ErrorMessageFromJson(*error));
    return chunk;
  }
  chunk.kind = StreamChunk::Kind::kData;
  if (auto choices = parsed.find("choices"); choices != parsed.end() && choices->is_array() && !choices->empty()) {
    const json& choice = (*choices)[0];
    auto append = [&chunk](const json& object, const char* key) {
      if (!object.is_object()) return;
      if (auto value = object.find(key); value != object.end() && value->is_string()) {
        chunk.text += value->get<std::string>();
      }
    };
    if (chat) {
      if (auto delta = choice.find("delta"); delta != choice.end()) {
        append(*delta, "reasoning_content");
        chunk.reasoning = chunk.text;
        append(*delta, "content");
      }
    } else {
      append(choice, "text");
    }
  }
  if (auto usage = parsed.find("usage"); usage != parsed.end() && usage->is_object()) {
    if (auto tokens = usage->find("completion_tokens"); tokens != usage->end() && tokens->is_number_integer()) {
      chunk.completion_tokens = tokens->get<int64_t>();
    }
    if (auto tokens = usage->find("prompt_tokens"); tokens != usage->end() && tokens->is_number_integer()) {
      chunk.prompt_tokens = tokens->get<int64_t>();
    }
    if (auto details = usage->find("prompt_tokens_details"); details != usage->end() && details->is_object()) {
      if (auto cached = details->find("cached_tokens"); cached != details->end() && cached->is_number_integer()) {
        chunk.cached_tokens = cached->get<int64_t>();
      }
    }
  }
  return chunk;
}

std::string ErrorMessageFromBody(absl::string_view body) {
  const json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded() && parsed.is_object()) {
    if (auto error = parsed.find("error"); error != parsed.end()) return Shorten(ErrorMessageFromJson(*error));
  }
  return Shorten(body);
}

absl::StatusOr<std::string> FirstModelId(absl::string_view body) {
  const json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded() && parsed.is_object()) {
    if (auto data = parsed.find("data"); data != parsed.end() && data->is_array()) {
      for (const json& model : *data) {
        if (model.is_object() && model.contains("id") && model["id"].is_string()) {
          return model["id"].get<std::string>();
        }
      }
      return absl::NotFoundError("the server lists no models");
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unexpected /v1/models answer: ", Shorten(body)));
}

}  // namespace llmc::bench
