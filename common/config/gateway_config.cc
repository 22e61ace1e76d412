#include "common/config/gateway_config.h"

#include "absl/strings/str_cat.h"
#include "common/config/validation.h"
#include "common/message_limits.h"
#include "common/status_macros.h"

namespace llmc::config {

absl::Status GatewayConfig::Validate() const {
  RETURN_IF_ERROR(ValidateListenAddress("listen_address", listen_address));
  RETURN_IF_ERROR(ValidateDialAddress("controller_address", controller_address));
  for (const auto& key : api_keys) {
    if (key.empty()) return absl::InvalidArgumentError("api_keys must not contain empty keys");
  }
  if (num_threads < 1 || num_threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat("num_threads must be in [1, 256], got ", num_threads));
  }
  if (max_body_bytes < 1024 || max_body_bytes > kMaxRequestBodyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_body_bytes must be in [1024, ", kMaxRequestBodyBytes, "], got ", max_body_bytes));
  }
  if (max_header_bytes < 1024) return absl::InvalidArgumentError("max_header_bytes must be at least 1024");
  RETURN_IF_ERROR(ValidatePositive("read_timeout", read_timeout));
  RETURN_IF_ERROR(ValidatePositive("idle_timeout", idle_timeout));
  RETURN_IF_ERROR(ValidatePositive("write_timeout", write_timeout));
  RETURN_IF_ERROR(ValidatePositive("sse_keepalive_interval", sse_keepalive_interval));
  RETURN_IF_ERROR(ValidatePositive("request_timeout", request_timeout));
  RETURN_IF_ERROR(ValidatePositive("routing_refresh_interval", routing_refresh_interval));
  if (worker_accept_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker_accept_timeout must not be negative");
  }
  if (max_attempts < 1 || max_attempts > 16) {
    return absl::InvalidArgumentError(absl::StrCat("max_attempts must be in [1, 16], got ", max_attempts));
  }
  return ValidateLogLevel("log_level", log_level);
}

}  // namespace llmc::config
