#ifndef LLMC_COMMON_CONFIG_VALIDATION_H_
#define LLMC_COMMON_CONFIG_VALIDATION_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace llmc::config {

// Checks shared by the configuration structs; each error names `key`.
absl::Status ValidateListenAddress(absl::string_view key, const std::string& value, bool allow_empty = false);
absl::Status ValidateDialAddress(absl::string_view key, const std::string& value);
absl::Status ValidatePositive(absl::string_view key, absl::Duration value);
absl::Status ValidateOneOf(absl::string_view key, const std::string& value,
                           std::initializer_list<absl::string_view> allowed);
absl::Status ValidateLogLevel(absl::string_view key, const std::string& value);

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_VALIDATION_H_
