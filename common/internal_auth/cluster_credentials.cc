#include "common/internal_auth/cluster_credentials.h"

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/host_port.h"
#include "common/status_macros.h"

namespace llmc::internal_auth {
namespace {

// Secrets and PEM files are small; anything larger is a wrong path.
constexpr std::streamsize kMaxFileBytes = 1 << 20;

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, absl::string_view key) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", key, " ", path));
  std::string text(kMaxFileBytes + 1, '\0');
  file.read(text.data(), kMaxFileBytes + 1);
  if (file.bad()) return absl::DataLossError(absl::StrCat("cannot read ", key, " ", path));
  if (file.gcount() > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(key, " ", path, " is larger than ", kMaxFileBytes, " bytes"));
  }
  text.resize(static_cast<size_t>(file.gcount()));
  return text;
}

absl::Status ValidateSecret(absl::string_view secret, absl::string_view source) {
  if (secret.size() < kMinClusterSecretBytes || secret.size() > kMaxClusterSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the cluster secret (", source, ") must be ", kMinClusterSecretBytes,
                                                   " to ", kMaxClusterSecretBytes, " characters long"));
  }
  for (unsigned char c : secret) {
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("the cluster secret (", source, ") must be printable ASCII without spaces, e.g. hex or base64"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view key) {
  ASSIGN_OR_RETURN(std::string pem, ReadSmallFile(path, key));
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(key, " ", path, " is not a PEM file"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<ClusterCredentials> LoadClusterCredentials(const config::InternalAuthConfig& config,
                                                          const char* environment_secret) {
  ClusterCredentials credentials;
  if (!config.cluster_secret.empty()) {
    credentials.secret = config.cluster_secret;
    RETURN_IF_ERROR(ValidateSecret(credentials.secret, "cluster_secret"));
  } else if (!config.cluster_secret_file.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadSmallFile(config.cluster_secret_file, "cluster_secret_file"));
    credentials.secret = std::string(absl::StripAsciiWhitespace(text));
    RETURN_IF_ERROR(
        ValidateSecret(credentials.secret, absl::StrCat("cluster_secret_file ", config.cluster_secret_file)));
  } else if (environment_secret != nullptr && *environment_secret != '\0') {
    credentials.secret = std::string(absl::StripAsciiWhitespace(environment_secret));
    RETURN_IF_ERROR(ValidateSecret(credentials.secret, kClusterSecretEnvironmentVariable));
  }
  const config::InternalTlsConfig& tls = config.internal_tls;
  if (tls.enabled()) {
    InternalTls files;
    ASSIGN_OR_RETURN(files.ca_pem, ReadPem(tls.ca_file, "internal_tls.ca_file"));
    ASSIGN_OR_RETURN(files.cert_pem, ReadPem(tls.cert_file, "internal_tls.cert_file"));
    ASSIGN_OR_RETURN(files.key_pem, ReadPem(tls.key_file, "internal_tls.key_file"));
    files.server_name = tls.server_name;
    credentials.tls = std::move(files);
  }
  return credentials;
}

std::string InternalAuthSummary(const ClusterCredentials& credentials) {
  if (!credentials.secret.empty() && credentials.tls.has_value()) return "cluster secret and mutual TLS";
  if (!credentials.secret.empty()) return "cluster secret";
  if (credentials.tls.has_value()) return "mutual TLS";
  return "off";
}

absl::Status CheckInternalExposure(const ClusterCredentials& credentials, const config::InternalAuthConfig& config,
                                   const std::string& listen_address) {
  if (credentials.authenticated() || config.allow_unauthenticated_internal) return absl::OkStatus();
  ASSIGN_OR_RETURN(HostPort listen, ParseHostPort(listen_address, /*allow_port_zero=*/true));
  if (IsLoopbackHost(listen.host)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to serve internal gRPC without authentication on ", listen_address,
      ", which is reachable beyond this machine: anyone who connects could register workers or bypass the "
      "gateway's API keys. Give every process the same cluster_secret_file (or LLMC_CLUSTER_SECRET), configure "
      "internal_tls, listen on 127.0.0.1, or set allow_unauthenticated_internal: true"));
}

}  // namespace llmc::internal_auth
