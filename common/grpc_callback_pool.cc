#include "common/grpc_callback_pool.h"

#include <string>
#include <utility>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace llmc {

AddresslessCallbackCall::AddresslessCallbackCall()
    : channel(grpc::CreateChannel("ipv4:", grpc::InsecureChannelCredentials())), stub(channel) {
  grpc::Slice empty{std::string()};
  request = grpc::ByteBuffer(&empty, 1);
}

void AddresslessCallbackCall::Start(std::function<void(const grpc::Status&)> done) {
  stub.UnaryCall(&context, "/llmc.CallbackPool/Nothing", grpc::StubOptions(), &request, &response, std::move(done));
}

void KeepGrpcCallbackPoolUntilExit() {
  // Never freed: the channel's hold on the pool must outlive every other gRPC object. A channel joins the
  // pool on its first callback call; the answer itself does not matter.
  static AddresslessCallbackCall* const holder = [] {
    auto* created = new AddresslessCallbackCall;
    created->Start([](const grpc::Status&) {});
    return created;
  }();
  (void)holder;
}

}  // namespace llmc
