#ifndef LLMC_GATEWAY_DISPATCH_WORKER_CHANNELS_H_
#define LLMC_GATEWAY_DISPATCH_WORKER_CHANNELS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/internal_auth/cluster_credentials.h"
#include "grpcpp/channel.h"
#include "llmc/v1/worker.grpc.pb.h"

namespace llmc::gateway {

// One gRPC channel per worker address, shared by all requests to it, with keepalive pings so a worker that
// vanishes mid-stream is noticed. Channels of workers that left the routing table are dropped; a call in
// flight keeps its own reference to its channel. Thread-safe.
class WorkerChannels {
 public:
  // Channels carry `credentials` (the cluster secret, internal TLS).
  explicit WorkerChannels(internal_auth::ClusterCredentials credentials = {}) : credentials_(std::move(credentials)) {}

  // Only needed to start a call: the call holds the channel from then on.
  std::shared_ptr<v1::Worker::Stub> Stub(const std::string& address);
  // Drops the channels of every address not in `addresses`.
  void RetainOnly(const absl::flat_hash_set<std::string>& addresses);
  size_t size() const;

 private:
  const internal_auth::ClusterCredentials credentials_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::Worker::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

// Channel arguments shared by the gateway's channels: keepalive, and a short reconnect backoff so a
// restarted peer is reachable again within a second; authenticated with `credentials`.
std::shared_ptr<grpc::Channel> MakeClusterChannel(const std::string& address,
                                                  const internal_auth::ClusterCredentials& credentials);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_WORKER_CHANNELS_H_
