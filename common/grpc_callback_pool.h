#ifndef LLMC_COMMON_GRPC_CALLBACK_POOL_H_
#define LLMC_COMMON_GRPC_CALLBACK_POOL_H_

#include <functional>
#include <memory>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace llmc {

// gRPC 1.51 (Debian 12's) runs the callbacks of its callback API on a pool of threads that lives while
// some channel or server that used the API does. When the last of them goes on one of the pool's own
// threads (a callback dropping the last reference to its channel, or a ClientContext, which holds one,
// freed after its call's callback), the pool joins itself, fails to, and frees its queue twice: the
// process aborts. This makes one channel that never goes, so the pool lasts until the process exits.
// Idempotent and cheap after the first call; the channel has no addresses, so it never connects.
void KeepGrpcCallbackPoolUntilExit();

// A callback call on a channel of its own with no addresses ("ipv4:"): it answers UNAVAILABLE at once and
// dials nothing. The object holds the channel and must outlive the call; its callback may free it.
struct AddresslessCallbackCall {
  AddresslessCallbackCall();
  void Start(std::function<void(const grpc::Status&)> done);

  std::shared_ptr<grpc::Channel> channel;
  grpc::GenericStub stub;
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
};

}  // namespace llmc

#endif  // LLMC_COMMON_GRPC_CALLBACK_POOL_H_
