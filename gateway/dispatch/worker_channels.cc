#include "gateway/dispatch/worker_channels.h"

#include "common/grpc_callback_pool.h"
#include "common/internal_auth/internal_channel.h"
#include "common/message_limits.h"
#include "grpcpp/support/channel_arguments.h"

namespace llmc::gateway {

std::shared_ptr<grpc::Channel> MakeClusterChannel(const std::string& address,
                                                  const internal_auth::ClusterCredentials& credentials) {
  KeepGrpcCallbackPoolUntilExit();
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20'000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A refused connection is tried again after 200 ms, then at most every second. gRPC also gives each attempt
  // "min reconnect backoff" to complete: at 200 ms, a connect on a loaded machine (seen under TSan) was cut off
  // with "tcp handshaker shutdown" and the call failed UNAVAILABLE against a peer that was listening.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5'000);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1'000);
  arguments.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  arguments.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  return internal_auth::CreateInternalChannel(address, credentials, std::move(arguments));
}

std::shared_ptr<v1::Worker::Stub> WorkerChannels::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (stub == nullptr) stub = v1::Worker::NewStub(MakeClusterChannel(address, credentials_));
  return stub;
}

void WorkerChannels::RetainOnly(const absl::flat_hash_set<std::string>& addresses) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(stubs_, [&addresses](const auto& entry) { return !addresses.contains(entry.first); });
}

size_t WorkerChannels::size() const {
  absl::MutexLock lock(&mu_);
  return stubs_.size();
}

}  // namespace llmc::gateway
