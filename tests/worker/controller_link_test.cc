// The worker's controller link against an in-process fake controller.
#include "worker/service/controller_link.h"

#include "tests/support/catch.h"
#include "tests/support/fake_controller.h"
#include "tests/support/wait.h"

namespace llmc::worker {
namespace {

using testing::FakeController;
using testing::WaitUntil;

constexpr absl::Duration kInterval = absl::Milliseconds(50);

v1::ModelInfo Model() {
  v1::ModelInfo model;
  model.set_name("tiny");
  model.set_max_context_length(2048);
  return model;
}

std::unique_ptr<ControllerLink> MakeLink(const std::string& controller_address) {
  // The fallback interval is long, so prompt heartbeats prove the controller's interval was adopted.
  ControllerLinkOptions options{controller_address, "worker-1", "127.0.0.1:9999", absl::Seconds(30), absl::Seconds(1)};
  return std::make_unique<ControllerLink>(options, Model(), [] {
    v1::WorkerLoad load;
    load.set_num_running(3);
    load.set_max_running(32);
    return load;
  });
}

TEST_CASE("controller link: registers, heartbeats at the controller's interval, re-registers when forgotten",
          "[unit][worker]") {
  FakeController controller(kInterval);
  auto link = MakeLink(controller.address());
  link->Start();
  REQUIRE(WaitUntil([&] { return controller.heartbeat_count() >= 3; }, absl::Seconds(5)));
  const std::vector<v1::RegisterWorkerRequest> registrations = controller.registrations();
  REQUIRE(registrations.size() == 1);
  CHECK(registrations[0].worker_id() == "worker-1");
  CHECK(registrations[0].address() == "127.0.0.1:9999");
  REQUIRE(registrations[0].models_size() == 1);
  CHECK(registrations[0].models(0).name() == "tiny");
  CHECK(registrations[0].load().max_running() == 32);
  CHECK(registrations[0].state() == v1::WORKER_STATE_READY);
  CHECK(!registrations[0].version().empty());
  const v1::HeartbeatRequest heartbeat = controller.heartbeats().back();
  CHECK(heartbeat.worker_id() == "worker-1");
  CHECK(heartbeat.load().num_running() == 3);

  controller.Forget("worker-1");
  REQUIRE(WaitUntil([&] { return controller.registration_count() == 2; }, absl::Seconds(5)));
  CHECK(controller.Knows("worker-1"));
  // The link counts a registration when the answer arrives, just after the controller recorded it.
  CHECK(WaitUntil([&] { return link->successful_registrations() == 2; }, absl::Seconds(5)));

  link->SetState(v1::WORKER_STATE_DRAINING);
  // Reported at once, not after the next interval.
  REQUIRE(
      WaitUntil([&] { return controller.heartbeats().back().state() == v1::WORKER_STATE_DRAINING; }, absl::Seconds(5)));
  // A draining worker that is forgotten does not come back.
  controller.Forget("worker-1");
  const int registrations_before = controller.registration_count();
  const int heartbeats_before = controller.heartbeat_count();
  // The next heartbeat is answered unknown_worker; registering again would take one interval.
  REQUIRE(WaitUntil([&] { return controller.heartbeat_count() > heartbeats_before; }, absl::Seconds(5)));
  absl::SleepFor(6 * kInterval);
  CHECK(controller.registration_count() == registrations_before);
  CHECK(!controller.Knows("worker-1"));

  link->Stop(/*deregister=*/true);
  CHECK(controller.deregistrations() == std::vector<std::string>{"worker-1"});
}

TEST_CASE("controller link: keeps retrying while the controller is down and registers once it is up",
          "[unit][worker]") {
  const int port = testing::PickFreePort();
  auto link = MakeLink("127.0.0.1:" + std::to_string(port));
  link->Start();
  absl::SleepFor(absl::Milliseconds(300));
  CHECK(link->successful_registrations() == 0);
  FakeController controller(kInterval, port);
  REQUIRE(WaitUntil([&] { return controller.registration_count() == 1; }, absl::Seconds(10)));
  REQUIRE(WaitUntil([&] { return link->accepted_heartbeats() >= 1; }, absl::Seconds(5)));
  link->Stop(/*deregister=*/true);
  CHECK(controller.deregistrations().size() == 1);
}

TEST_CASE("controller link: stopping without ever registering sends nothing and does not hang", "[unit][worker]") {
  const int port = testing::PickFreePort();
  auto link = MakeLink("127.0.0.1:" + std::to_string(port));
  link->Start();
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  link->Stop(/*deregister=*/true);
  CHECK(absl::Now() - start < absl::Seconds(2));
}

}  // namespace
}  // namespace llmc::worker
