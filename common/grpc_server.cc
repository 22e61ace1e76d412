#include "common/grpc_server.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_callback_pool.h"
#include "common/message_limits.h"
#include "common/status_codes.h"
#include "common/status_macros.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace llmc {

absl::StatusOr<StartedGrpcServer> StartGrpcServer(const std::string& listen_address, grpc::Service& service,
                                                  const GrpcServerOptions& options) {
  ASSIGN_OR_RETURN(HostPort listen, ParseHostPort(listen_address, /*allow_port_zero=*/true));
  KeepGrpcCallbackPoolUntilExit();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen_address,
                           options.credentials ? options.credentials : grpc::InsecureServerCredentials(), &bound_port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", listen_address));
  }
  return StartedGrpcServer{std::move(server), HostPort{listen.host, static_cast<uint16_t>(bound_port)}};
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace llmc
