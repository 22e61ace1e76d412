#include "common/config/gateway_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/config/validation.h"
#include "common/host_port.h"
#include "common/message_limits.h"
#include "common/status_macros.h"

namespace llmc::config {
namespace {

// A key file larger than this is a mistake (a wrong path), not a list of keys.
constexpr std::streamsize kMaxApiKeysFileBytes = 1 << 20;

void AddKey(absl::string_view key, std::vector<std::string>& keys) {
  key = absl::StripAsciiWhitespace(key);
  if (key.empty()) return;
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.emplace_back(key);
}

}  // namespace

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
  if (max_response_bytes < (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_response_bytes must be at least 1048576 (1 MiB), got ", max_response_bytes));
  }
  if (max_connections < 1) return absl::InvalidArgumentError("max_connections must be at least 1");
  if (max_inflight_body_bytes < max_body_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("max_inflight_body_bytes (", max_inflight_body_bytes,
                                                   ") must be at least max_body_bytes (", max_body_bytes, ")"));
  }
  RETURN_IF_ERROR(ValidatePositive("read_timeout", read_timeout));
  RETURN_IF_ERROR(ValidatePositive("idle_timeout", idle_timeout));
  RETURN_IF_ERROR(ValidatePositive("write_timeout", write_timeout));
  RETURN_IF_ERROR(ValidatePositive("sse_keepalive_interval", sse_keepalive_interval));
  RETURN_IF_ERROR(ValidatePositive("request_timeout", request_timeout));
  RETURN_IF_ERROR(ValidatePositive("routing_refresh_interval", routing_refresh_interval));
  if (worker_call_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker_call_timeout must not be negative");
  }
  if (worker_accept_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker_accept_timeout must not be negative");
  }
  if (drain_grace_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("drain_grace_period must not be negative");
  }
  if (max_attempts < 1 || max_attempts > 16) {
    return absl::InvalidArgumentError(absl::StrCat("max_attempts must be in [1, 16], got ", max_attempts));
  }
  RETURN_IF_ERROR(internal_auth.Validate());
  return ValidateLogLevel("log_level", log_level);
}

absl::StatusOr<std::vector<std::string>> GatewayConfig::EffectiveApiKeys(const char* environment_keys) const {
  std::vector<std::string> keys;
  for (const auto& key : api_keys) AddKey(key, keys);
  if (!api_keys_file.empty()) {
    std::ifstream file(api_keys_file, std::ios::binary);
    if (!file) return absl::NotFoundError(absl::StrCat("cannot read api_keys_file ", api_keys_file));
    std::string text(kMaxApiKeysFileBytes + 1, '\0');
    file.read(text.data(), kMaxApiKeysFileBytes + 1);
    if (file.bad()) return absl::DataLossError(absl::StrCat("cannot read api_keys_file ", api_keys_file));
    if (file.gcount() > kMaxApiKeysFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("api_keys_file ", api_keys_file, " is larger than ", kMaxApiKeysFileBytes, " bytes"));
    }
    text.resize(static_cast<size_t>(file.gcount()));
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || absl::StartsWith(line, "#")) continue;
      AddKey(line, keys);
    }
  }
  if (environment_keys != nullptr) {
    for (absl::string_view key : absl::StrSplit(environment_keys, ',')) AddKey(key, keys);
  }
  for (const auto& key : keys) {
    if (std::any_of(key.begin(), key.end(), [](char c) { return absl::ascii_isspace(c) || absl::ascii_iscntrl(c); })) {
      return absl::InvalidArgumentError("an API key must not contain spaces or control characters");
    }
  }
  return keys;
}

absl::Status GatewayConfig::CheckExposure(const std::vector<std::string>& effective_keys) const {
  if (!effective_keys.empty() || allow_unauthenticated) return absl::OkStatus();
  auto address = ParseHostPort(listen_address, /*allow_port_zero=*/true);
  if (!address.ok()) return address.status();
  if (IsLoopbackHost(address->host)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to serve without API keys on ", listen_address,
      ", which is reachable beyond this machine: set api_keys, api_keys_file or LLMC_API_KEYS, listen on "
      "127.0.0.1, or set allow_unauthenticated: true (--allow_unauthenticated) to serve anyone who can connect"));
}

}  // namespace llmc::config
