#ifndef LLMC_COMMON_GRPC_SERVER_H_
#define LLMC_COMMON_GRPC_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/host_port.h"
#include "common/message_limits.h"
#include "common/status_codes.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/support/server_callback.h"

namespace llmc {

struct StartedGrpcServer {
  std::unique_ptr<grpc::Server> server;
  HostPort address;  // as bound: the listen host with the real port (port 0 picks a free one)
};

struct GrpcServerOptions {
  // The transport: insecure, or TLS with client certificates (common/internal_auth).
  std::shared_ptr<grpc::ServerCredentials> credentials;  // null: insecure
  int max_receive_message_bytes = kMaxGrpcMessageBytes;
};

// Starts a gRPC server for `service` on `listen_address`, with the grpc.health.v1 service and the settings
// every llmc server shares: no port sharing (a second process must not silently take half the connections)
// and a keepalive policy that accepts the pings llmc's clients send every 20 s, also on idle connections
// (gRPC's default would answer them with GOAWAY "too many pings"). UNAVAILABLE when it cannot listen.
absl::StatusOr<StartedGrpcServer> StartGrpcServer(const std::string& listen_address, grpc::Service& service,
                                                  const GrpcServerOptions& options = {});

// Ends a callback unary RPC at once with `status` (mapped by common/status_codes.h).
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, const absl::Status& status);

// Ends a callback server-streaming RPC at once with `status`, before any message.
template <typename Response>
grpc::ServerWriteReactor<Response>* RefuseStream(const absl::Status& status) {
  class Refused final : public grpc::ServerWriteReactor<Response> {
   public:
    explicit Refused(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
    void OnDone() override { delete this; }
  };
  return new Refused(status);
}

}  // namespace llmc

#endif  // LLMC_COMMON_GRPC_SERVER_H_
