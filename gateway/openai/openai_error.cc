#include "gateway/openai/openai_error.h"

#include <cctype>
#include <string>

#include "absl/strings/cord.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "gateway/openai/json_fields.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {
namespace {

constexpr char kParamTypeUrl[] = "llmc/openai-param";
constexpr char kCodeTypeUrl[] = "llmc/openai-code";
constexpr char kClientMessageTypeUrl[] = "llmc/client-message";

std::string PayloadOf(const absl::Status& status, const char* type_url) {
  const absl::optional<absl::Cord> payload = status.GetPayload(type_url);
  return payload.has_value() ? std::string(*payload) : std::string();
}

nlohmann::ordered_json NullIfEmpty(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Whether `text` holds a dotted IPv4 address (four groups of digits).
bool HasIpv4Address(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!IsDigit(text[i]) || (i > 0 && (IsDigit(text[i - 1]) || text[i - 1] == '.'))) continue;
    size_t j = i;
    int groups = 0;
    while (true) {
      const size_t digits_start = j;
      while (j < text.size() && IsDigit(text[j])) ++j;
      if (j == digits_start || j - digits_start > 3) break;
      if (++groups == 4) return true;
      if (j >= text.size() || text[j] != '.') break;
      ++j;
    }
  }
  return false;
}

// Text that describes the cluster's inside rather than the request: gRPC's transport errors name worker
// addresses ("failed to connect to all addresses; last error: ... ipv4:10.0.0.5:21002: ..."), and libtorch's
// and CUDA's exceptions name source files, kernels and devices.
bool HasInternalDetail(std::string_view message) {
  static constexpr std::string_view kMarkers[] = {
      "ipv4:",
      "ipv6:",
      "unix:",
      "failed to connect",
      "connection refused",
      "connect failed",
      "socket closed",
      "connection reset",
      "broken pipe",
      "dns resolution",
      "all backends",
      "did not accept",
      "did not answer",
      "cuda",
      "cublas",
      "c10",
      "torch",
      "exception",
      "threw",
      ".cpp",
      ".cc:",
      "what():",
      "subchannel",
      "goaway",
  };
  std::string lower(message);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string_view marker : kMarkers) {
    if (lower.find(marker) != std::string::npos) return true;
  }
  return HasIpv4Address(message) || lower.find("]:") != std::string::npos;  // [fd00::5]:21002
}

std::string_view GenericMessage(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
      return "no worker could serve this request right now; retry shortly";
    case absl::StatusCode::kDeadlineExceeded:
      return "the request timed out";
    case absl::StatusCode::kResourceExhausted:
      return "the server is busy; retry shortly";
    case absl::StatusCode::kCancelled:
      return "the request was cancelled";
    case absl::StatusCode::kAborted:
      return "the request was aborted; retry it";
    default:
      return "the server failed while processing this request";
  }
}

}  // namespace

absl::Status ForClient(const absl::Status& status) {
  if (status.GetPayload(kClientMessageTypeUrl).has_value()) return status;
  const absl::StatusCode code = status.code();
  const bool internal_code =
      code == absl::StatusCode::kInternal || code == absl::StatusCode::kUnknown || code == absl::StatusCode::kDataLoss;
  // The codes a worker, gRPC's transport or the dispatch give; the others (INVALID_ARGUMENT, NOT_FOUND, ...)
  // describe the request and may quote it.
  const bool cluster_code = code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded ||
                            code == absl::StatusCode::kResourceExhausted || code == absl::StatusCode::kCancelled ||
                            code == absl::StatusCode::kAborted;
  if (!internal_code &&
      !(cluster_code && HasInternalDetail(std::string_view(status.message().data(), status.message().size()))))
    return status;
  LLMC_LOG(Warning).With("code", absl::StatusCodeToString(code))
      << "error detail kept from the client: " << status.message();
  const std::string_view message = GenericMessage(code);
  absl::Status generic(code, absl::string_view(message.data(), message.size()));
  status.ForEachPayload(
      [&](absl::string_view type_url, const absl::Cord& payload) { generic.SetPayload(type_url, payload); });
  return generic;
}

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

absl::Status WithClientMessage(absl::Status status) {
  if (!status.ok()) status.SetPayload(kClientMessageTypeUrl, absl::Cord());
  return status;
}

int HttpStatusOf(const absl::Status& status) {
  return status.ok() ? HttpStatusFor(absl::StatusCode::kInternal) : HttpStatusFor(status.code());
}

std::string ErrorEnvelope(const absl::Status& given) {
  const absl::Status status = ForClient(given);
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
