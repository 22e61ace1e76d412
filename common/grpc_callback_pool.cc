#include "common/grpc_callback_pool.h"

#include <memory>
#include <string>

#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"

namespace llmc {
namespace {

// Never freed: the channel's hold on the pool must outlive every other gRPC object.
struct PoolHolder {
  // "ipv4:" with no address: calls fail at once with UNAVAILABLE and nothing is dialled.
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel("ipv4:", grpc::InsecureChannelCredentials());
  grpc::GenericStub stub{channel};
  grpc::ClientContext context;
  grpc::Slice empty{std::string()};
  grpc::ByteBuffer request{&empty, 1};
  grpc::ByteBuffer response;
};

}  // namespace

void KeepGrpcCallbackPoolUntilExit() {
  static PoolHolder* const holder = [] {
    auto* created = new PoolHolder;
    // A channel joins the pool on its first callback call; the answer itself does not matter.
    created->stub.UnaryCall(&created->context, "/llmc.CallbackPool/Hold", grpc::StubOptions(), &created->request,
                            &created->response, [](const grpc::Status&) {});
    return created;
  }();
  (void)holder;
}

}  // namespace llmc
