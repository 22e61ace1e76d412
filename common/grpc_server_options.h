#ifndef LLMC_COMMON_GRPC_SERVER_OPTIONS_H_
#define LLMC_COMMON_GRPC_SERVER_OPTIONS_H_

#include "grpcpp/server_builder.h"

namespace llmc {

// Server settings every llmc gRPC server shares: no port sharing (a second process must not silently take
// half the connections) and a keepalive policy that accepts the pings llmc's clients send every 20 s, also
// on idle connections (gRPC's default would answer them with GOAWAY "too many pings").
inline void ApplyServerDefaults(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
}

}  // namespace llmc

#endif  // LLMC_COMMON_GRPC_SERVER_OPTIONS_H_
