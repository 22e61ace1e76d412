#include "common/internal_auth/internal_call_authenticator.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace llmc::internal_auth {
namespace {

// Takes as long for every `given` of one length, so timing tells an attacker nothing about the secret.
bool ConstantTimeEquals(absl::string_view given, absl::string_view secret) {
  volatile unsigned char difference = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char other = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference = difference | (other ^ static_cast<unsigned char>(secret[i]));
  }
  return difference == 0;
}

}  // namespace

absl::Status InternalCallAuthenticator::Check(const grpc::ServerContextBase& context) const {
  if (secret_.empty()) return absl::OkStatus();
  const auto [first, last] = context.client_metadata().equal_range(kClusterSecretMetadataKey);
  if (first == last) return absl::UnauthenticatedError("this internal call does not carry the cluster secret");
  if (std::next(first) != last) return absl::UnauthenticatedError("the cluster secret is sent more than once");
  if (!ConstantTimeEquals(absl::string_view(first->second.data(), first->second.size()), secret_)) {
    return absl::UnauthenticatedError("wrong cluster secret");
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> InternalServerCredentials(const ClusterCredentials& credentials) {
  if (!credentials.tls.has_value()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = credentials.tls->ca_pem;
  options.pem_key_cert_pairs.push_back({credentials.tls->key_pem, credentials.tls->cert_pem});
  return grpc::SslServerCredentials(options);
}

std::string PeerHost(const std::string& peer) {
  absl::string_view host(peer);
  if (absl::ConsumePrefix(&host, "ipv4:")) {
    return std::string(host.substr(0, host.rfind(':')));
  }
  if (absl::ConsumePrefix(&host, "ipv6:")) {
    if (absl::ConsumePrefix(&host, "[")) host = host.substr(0, host.find(']'));
    absl::ConsumePrefix(&host, "::ffff:");
    return std::string(host);
  }
  return peer;  // a Unix socket or another transport: the whole name
}

}  // namespace llmc::internal_auth
