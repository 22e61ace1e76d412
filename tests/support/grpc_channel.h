#ifndef LLMC_TESTS_SUPPORT_GRPC_CHANNEL_H_
#define LLMC_TESTS_SUPPORT_GRPC_CHANNEL_H_

#include <memory>
#include <string>

#include "grpcpp/channel.h"
#include "tests/support/cluster_secret.h"

namespace llmc::testing {

// An insecure channel that reconnects within ~100 ms, so tests that start a server after dialling it (or
// restart it) do not sit out gRPC's default one-second-and-growing reconnect backoff. Its calls carry
// `secret` (default: kTestClusterSecret, which the process helpers give the real binaries); empty: none.
std::shared_ptr<grpc::Channel> MakeTestChannel(const std::string& address,
                                               const std::string& secret = kTestClusterSecret);
// The same with any credentials (internal TLS included).
std::shared_ptr<grpc::Channel> MakeTestChannel(const std::string& address,
                                               const internal_auth::ClusterCredentials& credentials);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_GRPC_CHANNEL_H_
