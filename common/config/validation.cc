#include "common/config/validation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace llmc::config {

absl::Status ValidateListenAddress(absl::string_view key, const std::string& value, bool allow_empty) {
  if (value.empty() && allow_empty) return absl::OkStatus();
  return Annotate(ParseHostPort(value, /*allow_port_zero=*/true).status(), key);
}

absl::Status ValidateDialAddress(absl::string_view key, const std::string& value) {
  return Annotate(ParseHostPort(value).status(), key);
}

absl::Status ValidatePositive(absl::string_view key, absl::Duration value) {
  if (value > absl::ZeroDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(key, " must be positive, got ", absl::FormatDuration(value)));
}

absl::Status ValidateOneOf(absl::string_view key, const std::string& value,
                           std::initializer_list<absl::string_view> allowed) {
  for (absl::string_view option : allowed) {
    if (value == option) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(key, " must be one of ", absl::StrJoin(allowed, ", "), "; got '", value, "'"));
}

absl::Status ValidateLogLevel(absl::string_view key, const std::string& value) {
  return Annotate(ParseLogLevel(value).status(), key);
}

}  // namespace llmc::config
