#include "common/config/internal_auth_config.h"

namespace llmc::config {

absl::Status InternalAuthConfig::Validate() const {
  if (!cluster_secret.empty() && !cluster_secret_file.empty()) {
    return absl::InvalidArgumentError("set cluster_secret or cluster_secret_file, not both");
  }
  if (internal_tls.enabled() &&
      (internal_tls.ca_file.empty() || internal_tls.cert_file.empty() || internal_tls.key_file.empty())) {
    return absl::InvalidArgumentError(
        "internal_tls needs all of ca_file, cert_file and key_file (every process presents and checks a "
        "certificate)");
  }
  if (internal_tls.enabled() && internal_tls.server_name.empty()) {
    return absl::InvalidArgumentError("internal_tls.server_name must not be empty");
  }
  return absl::OkStatus();
}

}  // namespace llmc::config
