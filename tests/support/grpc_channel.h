#ifndef LLMC_TESTS_SUPPORT_GRPC_CHANNEL_H_
#define LLMC_TESTS_SUPPORT_GRPC_CHANNEL_H_

#include <memory>
#include <string>

#include "grpcpp/channel.h"

namespace llmc::testing {

// An insecure channel that reconnects within ~100 ms, so tests that start a server after dialling it (or
// restart it) do not sit out gRPC's default one-second-and-growing reconnect backoff.
std::shared_ptr<grpc::Channel> MakeTestChannel(const std::string& address);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_GRPC_CHANNEL_H_
