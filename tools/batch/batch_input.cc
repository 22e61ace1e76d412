#include "tools/batch/batch_input.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace llmc::batch {
namespace {

using nlohmann::json;

// The body as the gateway would parse it for `url`.
absl::Status ParseBody(const std::string& url, const std::string& body, BatchRequest& request) {
  request.url = url;
  if (url == "/v1/embeddings") {
    absl::StatusOr<gateway::EmbeddingRequest> parsed = gateway::ParseEmbeddingRequest(body);
    if (!parsed.ok()) return parsed.status();
    request.embedding = *std::move(parsed);
    return absl::OkStatus();
  }
  absl::StatusOr<gateway::OpenAiRequest> parsed =
      url == "/v1/chat/completions" ? gateway::ParseChatCompletionRequest(body) : gateway::ParseCompletionRequest(body);
  if (!parsed.ok()) return parsed.status();
  if (parsed->stream) return absl::InvalidArgumentError("'stream' is not supported in a batch");
  request.generation = *std::move(parsed);
  return absl::OkStatus();
}

}  // namespace

bool LooksLikeOpenAiBatch(std::string_view first_line) {
  const size_t first = first_line.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && first_line[first] == '{';
}

BatchLine ParseOpenAiBatchLine(std::string_view line) {
  BatchLine out;
  const json parsed = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    out.line_error = absl::InvalidArgumentError("the line is not a JSON object");
    return out;
  }
  if (const auto id = parsed.find("custom_id"); id != parsed.end() && id->is_string()) {
    out.custom_id = id->get<std::string>();
  } else {
    out.line_error = absl::InvalidArgumentError("custom_id is required and must be a string");
    return out;
  }
  const auto method = parsed.find("method");
  if (method == parsed.end() || *method != "POST") {
    out.line_error = absl::InvalidArgumentError("method must be \"POST\"");
    return out;
  }
  const auto url = parsed.find("url");
  if (url == parsed.end() || !url->is_string() ||
      (*url != "/v1/chat/completions" && *url != "/v1/completions" && *url != "/v1/embeddings")) {
    out.line_error = absl::InvalidArgumentError("url must be /v1/chat/completions, /v1/completions or /v1/embeddings");
    return out;
  }
  const auto body = parsed.find("body");
  if (body == parsed.end() || !body->is_object()) {
    out.line_error = absl::InvalidArgumentError("body must be a JSON object");
    return out;
  }
  BatchRequest request;
  out.request_error = ParseBody(url->get<std::string>(), body->dump(), request);
  if (out.request_error.ok()) out.request = std::move(request);
  return out;
}

BatchLine PromptLine(std::string_view prompt, int64_t line_number, const std::string& model, int64_t max_tokens,
                     double temperature) {
  BatchLine out;
  out.custom_id = absl::StrCat("prompt-", line_number);
  const json body = {
      {"model", model}, {"prompt", std::string(prompt)}, {"max_tokens", max_tokens}, {"temperature", temperature}};
  std::string text;
  try {
    text = body.dump();
  } catch (const json::exception&) {
    out.request_error = absl::InvalidArgumentError("the prompt is not valid UTF-8");
    return out;
  }
  BatchRequest request;
  out.request_error = ParseBody("/v1/completions", text, request);
  if (out.request_error.ok()) out.request = std::move(request);
  return out;
}

}  // namespace llmc::batch
