#include "tests/support/grpc_channel.h"

#include <utility>

#include "common/internal_auth/internal_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace llmc::testing {

std::shared_ptr<grpc::Channel> MakeTestChannel(const std::string& address, const std::string& secret) {
  internal_auth::ClusterCredentials credentials;
  credentials.secret = secret;
  return MakeTestChannel(address, credentials);
}

std::shared_ptr<grpc::Channel> MakeTestChannel(const std::string& address,
                                               const internal_auth::ClusterCredentials& credentials) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return internal_auth::CreateInternalChannel(address, credentials, std::move(args));
}

}  // namespace llmc::testing
