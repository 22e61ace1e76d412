#ifndef LLMC_GATEWAY_DISPATCH_INTERNAL_AUTH_FAILURE_H_
#define LLMC_GATEWAY_DISPATCH_INTERNAL_AUTH_FAILURE_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace llmc::gateway {

// True when a controller or worker refused this gateway's internal credentials: UNAUTHENTICATED (a missing
// or wrong cluster secret) or PERMISSION_DENIED. Neither code means anything else on the calls the gateway
// makes, and neither is the client's doing, so neither may reach the client as a 401 or 403 that blames its
// API key.
bool IsInternalAuthFailure(const grpc::Status& status);

// What the client gets instead: INTERNAL (HTTP 500, type server_error, code internal_error) saying that the
// gateway could not authenticate to `peer` ("a worker", "the controller"), with nothing of the secret.
// Logs `peer_detail` (which worker) and the peer's own reason at Error, once per call.
absl::Status InternalAuthFailure(const std::string& peer, const std::string& peer_detail, const grpc::Status& status);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_INTERNAL_AUTH_FAILURE_H_
