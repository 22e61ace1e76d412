#ifndef LLMC_COMMON_INTERNAL_AUTH_INTERNAL_CHANNEL_H_
#define LLMC_COMMON_INTERNAL_AUTH_INTERNAL_CHANNEL_H_

#include <memory>
#include <string>

#include "common/internal_auth/cluster_credentials.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace llmc::internal_auth {

// A channel to another process of the cluster. With internal TLS it presents this process's certificate and
// checks the server's against the cluster CA for `server_name` (whatever address is dialled); with a secret,
// every call on it carries the secret. Without either it is a plain insecure channel.
std::shared_ptr<grpc::Channel> CreateInternalChannel(const std::string& address, const ClusterCredentials& credentials,
                                                     grpc::ChannelArguments arguments);

}  // namespace llmc::internal_auth

#endif  // LLMC_COMMON_INTERNAL_AUTH_INTERNAL_CHANNEL_H_
