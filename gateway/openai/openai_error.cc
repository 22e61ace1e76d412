#include "gateway/openai/openai_error.h"

#include "absl/strings/cord.h"
#include "common/status_codes.h"
#include "gateway/openai/json_fields.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {
namespace {

constexpr char kParamTypeUrl[] = "llmc/openai-param";
constexpr char kCodeTypeUrl[] = "llmc/openai-code";

std::string PayloadOf(const absl::Status& status, const char* type_url) {
  const absl::optional<absl::Cord> payload = status.GetPayload(type_url);
  return payload.has_value() ? std::string(*payload) : std::string();
}

nlohmann::ordered_json NullIfEmpty(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

}  // namespace

absl::Status InvalidParameter(std::string_view param, std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(absl::string_view(message.data(), message.size()));
  if (!param.empty()) status.SetPayload(kParamTypeUrl, absl::Cord(absl::string_view(param.data(), param.size())));
  return status;
}

std::string ParameterOf(const absl::Status& status) { return PayloadOf(status, kParamTypeUrl); }

absl::Status WithErrorCode(absl::Status status, std::string_view code) {
  if (!status.ok()) status.SetPayload(kCodeTypeUrl, absl::Cord(absl::string_view(code.data(), code.size())));
  return status;
}

std::string ErrorCodeOf(const absl::Status& status) { return PayloadOf(status, kCodeTypeUrl); }

int HttpStatusOf(const absl::Status& status) {
  return status.ok() ? HttpStatusFor(absl::StatusCode::kInternal) : HttpStatusFor(status.code());
}

std::string ErrorEnvelope(const absl::Status& status) {
  const absl::StatusCode code = status.ok() ? absl::StatusCode::kInternal : status.code();
  std::string message(status.message());
  if (message.empty()) message = absl::StatusCodeToString(code);
  nlohmann::ordered_json error;
  error["message"] = std::move(message);
  error["type"] = std::string(OpenAiErrorTypeFor(code));
  error["param"] = NullIfEmpty(ParameterOf(status));
  error["code"] = NullIfEmpty(ErrorCodeOf(status));
  nlohmann::ordered_json envelope;
  envelope["error"] = std::move(error);
  return DumpJson(envelope);
}

std::string StreamErrorEvent(const absl::Status& status) { return ErrorEnvelope(status); }

}  // namespace llmc::gateway
