// A generation whose pick is still in flight: cancelling it cancels the pick, and shutting the dispatcher
// and the router down waits for its callback instead of leaving it to run on destroyed objects.
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "gateway/dispatch/generation_dispatcher.h"
#include "gateway/dispatch/worker_channels.h"
#include "gateway/dispatch/worker_router.h"
#include "grpcpp/server_builder.h"
#include "tests/support/catch.h"
#include "tests/support/wait.h"

namespace llmc::gateway {
namespace {

// A controller whose PickWorker answers only when the caller cancels (or its deadline passes).
class StalledController final : public v1::Controller::CallbackService {
 public:
  StalledController() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~StalledController() override { server_->Shutdown(); }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int pending() const { return pending_.load(); }
  int cancelled() const { return cancelled_.load(); }

  grpc::ServerUnaryReactor* PickWorker(grpc::CallbackServerContext* context, const v1::PickWorkerRequest* request,
                                       v1::PickWorkerResponse* response) override {
    class Stalled final : public grpc::ServerUnaryReactor {
     public:
      explicit Stalled(StalledController& owner) : owner_(owner) { ++owner_.pending_; }
      void OnCancel() override {
        ++owner_.cancelled_;
        Finish(grpc::Status::CANCELLED);
      }
      void OnDone() override {
        --owner_.pending_;
        delete this;
      }

     private:
      StalledController& owner_;
    };
    return new Stalled(*this);
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> pending_{0};
  std::atomic<int> cancelled_{0};
};

// Records on_done.
struct DoneRecord {
  absl::Mutex mu;
  int calls = 0;
  std::optional<absl::Status> status;
  DispatchCallbacks Callbacks() {
    return {[](v1::GenerateResponse, ReadNext read_next) { read_next(); },
            [this](absl::Status done) {
              absl::MutexLock lock(&mu);
              ++calls;
              status = done;
            }};
  }
  int count() {
    absl::MutexLock lock(&mu);
    return calls;
  }
};

// Long enough that a pick stays pending on a loaded machine until the test cancels it: with the default
// second, the first call's connect could outlast it and the pick would end before the controller saw it.
constexpr absl::Duration kPatientDeadline = absl::Seconds(60);

// Waits until the controller holds the dispatched pick; a pick that ended first fails with its status (under TSan
// a connect once outlasted the 200 ms the channels then gave an attempt, and the pick failed at once).
void RequirePickPending(const StalledController& controller, DoneRecord& done) {
  REQUIRE(testing::WaitUntil([&] { return controller.pending() == 1 || done.count() > 0; }, absl::Seconds(5)));
  if (done.count() > 0) {
    absl::MutexLock lock(&done.mu);
    FAIL("the pick ended before the controller saw it: " << done.status->ToString());
  }
}

v1::GenerateRequest ShutdownTestRequest() {
  v1::GenerateRequest request;
  request.set_model("some-model");
  request.set_prompt("hi");
  return request;
}

TEST_CASE("dispatch: cancelling a generation whose pick is in flight cancels the pick", "[unit][gateway]") {
  StalledController controller;
  WorkerRouter router(controller.address(), absl::Hours(1), {}, kPatientDeadline);
  WorkerChannels channels;
  GenerationDispatcher dispatcher(router, channels, DispatchOptions{});
  DoneRecord done;
  auto handle = dispatcher.Dispatch(ShutdownTestRequest(), absl::Now() + absl::Seconds(30), done.Callbacks());
  RequirePickPending(controller, done);
  handle->Cancel();
  REQUIRE(testing::WaitUntil([&] { return done.count() == 1; }, absl::Seconds(5)));
  REQUIRE(done.status.has_value());
  CHECK(done.status->code() == absl::StatusCode::kCancelled);
  CHECK(testing::WaitUntil([&] { return controller.cancelled() == 1; }, absl::Seconds(5)));
}

TEST_CASE("dispatch: shutdown returns only after the callbacks of picks in flight have run", "[unit][gateway]") {
  StalledController controller;
  DoneRecord done;
  {
    WorkerRouter router(controller.address(), absl::Hours(1), {}, kPatientDeadline);
    WorkerChannels channels;
    GenerationDispatcher dispatcher(router, channels, DispatchOptions{});
    dispatcher.Dispatch(ShutdownTestRequest(), absl::Now() + absl::Seconds(30), done.Callbacks());
    RequirePickPending(controller, done);
    dispatcher.Shutdown();
    REQUIRE(done.count() == 1);  // before the router's own Stop, which would also wait for the pick
    CHECK(done.status->code() == absl::StatusCode::kUnavailable);
    router.Stop();

    DoneRecord late;
    dispatcher.Dispatch(ShutdownTestRequest(), absl::Now() + absl::Seconds(30), late.Callbacks());
    REQUIRE(late.count() == 1);
    CHECK(late.status->code() == absl::StatusCode::kUnavailable);
  }
  CHECK(done.count() == 1);
}

}  // namespace
}  // namespace llmc::gateway
