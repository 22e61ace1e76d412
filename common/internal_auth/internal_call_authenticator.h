#ifndef LLMC_COMMON_INTERNAL_AUTH_INTERNAL_CALL_AUTHENTICATOR_H_
#define LLMC_COMMON_INTERNAL_AUTH_INTERNAL_CALL_AUTHENTICATOR_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/internal_auth/cluster_credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"

namespace llmc::internal_auth {

// The server side of the cluster secret: every handler of an internal service first calls Check(context)
// and ends the call with its error. A check in each handler rather than in a server interceptor
// because gRPC C++'s server interceptors cannot end a call with a status (Hijack is client-only) and an
// AuthMetadataProcessor needs transport security; tests/controller/internal_auth_test.cc calls every method
// of the internal services without the secret, so a handler that forgets the check fails it.
class InternalCallAuthenticator {
 public:
  // Accepts every call: no secret is configured.
  InternalCallAuthenticator() = default;
  // Accepts calls carrying `secret`; empty accepts every call.
  explicit InternalCallAuthenticator(std::string secret) : secret_(std::move(secret)) {}

  // UNAUTHENTICATED unless the call carries the cluster secret (exactly once), compared in constant time.
  // TLS client certificates, when configured, were already verified by the transport.
  absl::Status Check(const grpc::ServerContextBase& context) const;

 private:
  std::string secret_;
};

// Server credentials for the cluster's gRPC servers: TLS that requires and verifies a client certificate
// signed by the cluster CA when internal TLS is configured, else insecure.
std::shared_ptr<grpc::ServerCredentials> InternalServerCredentials(const ClusterCredentials& credentials);

// The host of a gRPC peer string ("ipv4:10.0.0.7:53211" -> "10.0.0.7", "ipv6:[::1]:5000" -> "::1"), which
// identifies the machine (pod) that made a call; IPv4-mapped IPv6 addresses read as IPv4.
std::string PeerHost(const std::string& peer);

}  // namespace llmc::internal_auth

#endif  // LLMC_COMMON_INTERNAL_AUTH_INTERNAL_CALL_AUTHENTICATOR_H_
