#include "common/grpc_callback_pool.h"

#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tests/support/catch.h"

namespace llmc {
namespace {

grpc::StatusCode CallFreeingItsChannelInTheCallback() {
  // The call, the only holder of its channel, is freed by its own callback: the channel goes on one of
  // gRPC's callback threads.
  auto* call = new AddresslessCallbackCall;
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  auto answered = std::make_shared<absl::Notification>();
  auto code = std::make_shared<grpc::StatusCode>(grpc::StatusCode::UNKNOWN);
  call->Start([call, answered, code](const grpc::Status& status) {
    *code = status.error_code();
    delete call;
    answered->Notify();
  });
  REQUIRE(answered->WaitForNotificationWithTimeout(absl::Seconds(10)));
  return *code;
}

// Without the held pool, the first round aborts the process in gRPC 1.51 (a double free of the pool's
// queue, or a failed refcount assertion).
TEST_CASE("grpc callback pool: a channel freed in its own call's callback leaves the process serving", "[unit][grpc]") {
  KeepGrpcCallbackPoolUntilExit();
  KeepGrpcCallbackPoolUntilExit();  // idempotent
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    // "ipv4:" has no address: UNAVAILABLE at once, without dialling anything.
    CHECK(CallFreeingItsChannelInTheCallback() == grpc::StatusCode::UNAVAILABLE);
  }
}

}  // namespace
}  // namespace llmc
