#ifndef LLMC_COMMON_INTERNAL_AUTH_CLUSTER_CREDENTIALS_H_
#define LLMC_COMMON_INTERNAL_AUTH_CLUSTER_CREDENTIALS_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config/internal_auth_config.h"

namespace llmc::internal_auth {

inline constexpr char kClusterSecretEnvironmentVariable[] = "LLMC_CLUSTER_SECRET";
// The metadata entry every internal call carries the secret in (gRPC metadata keys are lower case).
inline constexpr char kClusterSecretMetadataKey[] = "llmc-cluster-secret";
inline constexpr size_t kMinClusterSecretBytes = 16;
inline constexpr size_t kMaxClusterSecretBytes = 1024;

// The PEM texts of internal_tls, read at start.
struct InternalTls {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string server_name;
};

// What this process shows its peers and asks of them. Empty (the default): nothing either way, which is
// how in-process tests and loopback-only setups run.
struct ClusterCredentials {
  std::string secret;
  std::optional<InternalTls> tls;

  bool authenticated() const { return !secret.empty() || tls.has_value(); }
};

// The secret from cluster_secret, else cluster_secret_file, else `environment_secret` (the value of
// LLMC_CLUSTER_SECRET, may be null), and the TLS files. A secret must be 16 to 1024 printable ASCII characters
// without spaces (it travels as gRPC metadata); whitespace around it in a file or the environment is ignored.
absl::StatusOr<ClusterCredentials> LoadClusterCredentials(const config::InternalAuthConfig& config,
                                                          const char* environment_secret);

// For the start-up log: "cluster secret", "mutual TLS", "cluster secret and mutual TLS" or "off".
std::string InternalAuthSummary(const ClusterCredentials& credentials);

// FAILED_PRECONDITION, saying what to do, when a gRPC server on `listen_address` would take internal calls
// from beyond this machine without authenticating them and allow_unauthenticated_internal is not set.
absl::Status CheckInternalExposure(const ClusterCredentials& credentials, const config::InternalAuthConfig& config,
                                   const std::string& listen_address);

}  // namespace llmc::internal_auth

#endif  // LLMC_COMMON_INTERNAL_AUTH_CLUSTER_CREDENTIALS_H_
