#include "gateway/openai/embedding_request.h"

#include <cstring>
#include <optional>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gateway/openai/json_fields.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_request.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {
namespace {

using nlohmann::json;

absl::Status AddText(const json& text, const std::string& param, v1::EmbedRequest& request) {
  if (text.get_ref<const std::string&>().empty()) {
    return InvalidParameter(param, absl::StrCat("'", param, "' is an empty string; there is nothing to embed"));
  }
  request.add_inputs()->set_text(text.get<std::string>());
  return absl::OkStatus();
}

absl::Status AddTokenIds(const json& ids, const std::string& param, v1::EmbedRequest& request) {
  ASSIGN_OR_RETURN(const std::vector<int32_t> parsed, ReadTokenIds(ids, param));
  request.add_inputs()->mutable_token_ids()->mutable_ids()->Add(parsed.begin(), parsed.end());
  return absl::OkStatus();
}

// input: a string, a list of strings, a list of token ids, or a list of token-id lists.
absl::Status ReadInput(const FieldReader& fields, v1::EmbedRequest& request) {
  const json* input = fields.Find("input");
  if (input == nullptr) return InvalidParameter("input", "'input' is required");
  if (input->is_string()) return AddText(*input, "input", request);
  if (!input->is_array()) {
    return fields.WrongType("input", *input, "a string, an array of strings, or token ids");
  }
  if (input->empty()) return InvalidParameter("input", "'input' is an empty array; there is nothing to embed");
  const json& first = input->front();
  if (first.is_number()) return AddTokenIds(*input, "input", request);  // one input; the context bounds it
  if (input->size() > kMaxEmbeddingInputs) {
    return InvalidParameter("input", absl::StrCat("'input' holds ", input->size(), " items; at most ",
                                                  kMaxEmbeddingInputs, " may be embedded in one request"));
  }
  for (size_t i = 0; i < input->size(); ++i) {
    const json& item = (*input)[i];
    const std::string param = absl::StrCat("input[", i, "]");
    if (first.is_string() && item.is_string()) {
      RETURN_IF_ERROR(AddText(item, param, request));
    } else if (first.is_array() && item.is_array()) {
      RETURN_IF_ERROR(AddTokenIds(item, param, request));
    } else {
      return InvalidParameter(param, absl::StrCat("'input' must be all strings or all token-id lists; '", param,
                                                  "' is ", DescribeJsonType(item)));
    }
  }
  return absl::OkStatus();
}

std::string Base64Floats(const v1::Embedding& embedding) {
  static_assert(ABSL_IS_LITTLE_ENDIAN, "base64 embeddings are little-endian float32, as OpenAI's");
  std::string bytes(static_cast<size_t>(embedding.values_size()) * sizeof(float), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), embedding.values().data(), bytes.size());
  return absl::Base64Escape(bytes);
}

}  // namespace

absl::StatusOr<EmbeddingRequest> ParseEmbeddingRequest(std::string_view body) {
  ASSIGN_OR_RETURN(const json parsed, ParseRequestBody(body));
  const FieldReader fields(parsed);
  EmbeddingRequest request;
  ASSIGN_OR_RETURN(const std::optional<std::string> model, fields.String("model"));
  request.embed.set_model(model.value_or(""));
  RETURN_IF_ERROR(ReadInput(fields, request.embed));
  ASSIGN_OR_RETURN(const std::optional<std::string> format, fields.String("encoding_format"));
  if (format.has_value() && *format != "float" && *format != "base64") {
    return InvalidParameter("encoding_format",
                            absl::StrCat("'encoding_format' must be \"float\" or \"base64\", not \"", *format, "\""));
  }
  request.base64 = format == "base64";
  ASSIGN_OR_RETURN(const std::optional<int64_t> dimensions, fields.Int("dimensions", 1, 1 << 20));
  if (dimensions.has_value()) request.embed.set_dimensions(static_cast<uint32_t>(*dimensions));
  ASSIGN_OR_RETURN(const std::optional<bool> add_special_tokens, fields.Bool("add_special_tokens"));
  if (add_special_tokens.has_value()) request.embed.set_add_special_tokens(*add_special_tokens);
  ASSIGN_OR_RETURN(const std::optional<std::string> user, fields.String("user"));
  (void)user;  // accepted for the OpenAI SDKs; it changes nothing here
  return request;
}

std::string EmbeddingResponseJson(const v1::EmbedResponse& response, const std::string& model, bool base64) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (int i = 0; i < response.embeddings_size(); ++i) {
    const v1::Embedding& embedding = response.embeddings(i);
    nlohmann::ordered_json item{{"object", "embedding"}, {"index", i}};
    if (base64) {
      item["embedding"] = Base64Floats(embedding);
    } else {
      item["embedding"] = std::vector<float>(embedding.values().begin(), embedding.values().end());
    }
    data.push_back(std::move(item));
  }
  nlohmann::ordered_json out{
      {"object", "list"},
      {"data", std::move(data)},
      {"model", model},
      {"usage",
       {{"prompt_tokens", response.usage().prompt_tokens()}, {"total_tokens", response.usage().total_tokens()}}}};
  return DumpJson(out);
}

}  // namespace llmc::gateway
