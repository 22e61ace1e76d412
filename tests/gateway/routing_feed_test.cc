// The routing feed end to end over real gRPC: a controller process streams its table to gateways' routers
// (in this process), which pick from it without asking the controller, report their picks, and see each
// other's picks through the controller.
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "controller/controller_server.h"
#include "gateway/dispatch/worker_router.h"
#include "grpcpp/create_channel.h"
#include "tests/support/catch.h"
#include "tests/support/cluster_secret.h"
#include "tests/support/controller_process.h"
#include "tests/support/fake_worker.h"
#include "tests/support/metrics_text.h"
#include "tests/support/wait.h"

namespace llmc::gateway {
namespace {

using testing::ControllerProcess;
using testing::MakeRegistration;
using testing::ScrapeMetric;
using testing::TestClusterCredentials;
using testing::WaitUntil;

absl::StatusOr<PickedWorker> PickNow(WorkerRouter& router, const std::string& model,
                                     const std::vector<uint64_t>& hashes = {}) {
  absl::StatusOr<PickedWorker> result = absl::UnknownError("no answer");
  absl::Notification answered;
  router.Pick(model, {}, hashes, [&](absl::StatusOr<PickedWorker> picked) {
    result = std::move(picked);
    answered.Notify();
  });
  answered.WaitForNotificationWithTimeout(absl::Seconds(5));
  return result;
}

uint32_t TotalPicks(const std::vector<v1::WorkerInfo>& workers) {
  uint32_t total = 0;
  for (const auto& worker : workers) total += worker.picks_since_heartbeat();
  return total;
}

void RegisterWorkers(ControllerProcess& controller, int count) {
  for (int i = 0; i < count; ++i) {
    grpc::ClientContext context;
    v1::RegisterWorkerResponse response;
    REQUIRE(controller.controller()
                .RegisterWorker(&context,
                                MakeRegistration("w" + std::to_string(i), "127.0.0.1:" + std::to_string(30001 + i),
                                                 "qwen", /*max_running=*/4),
                                &response)
                .ok());
  }
}

void Heartbeat(ControllerProcess& controller, const std::string& worker_id) {
  grpc::ClientContext context;
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker_id);
  heartbeat.mutable_load()->set_max_running(4);
  v1::HeartbeatResponse response;
  REQUIRE(controller.controller().Heartbeat(&context, heartbeat, &response).ok());
}

// Heartbeats every hour: the picks stay counted until the test's own heartbeats.
const std::vector<std::string> kQuietHeartbeats = {"--heartbeat_interval=1h"};

TEST_CASE("routing feed: a gateway picks from the streamed table and the controller counts its picks",
          "[integration][routing]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, kQuietHeartbeats);
  RegisterWorkers(controller, 2);
  WorkerRouter router(controller.address(), absl::Seconds(1), {}, absl::Seconds(1), TestClusterCredentials());
  router.Start();
  REQUIRE(WaitUntil([&] { return router.watching() && router.replica().Workers().size() == 2; }, absl::Seconds(10)));
  CHECK(ScrapeMetric(controller.metrics_port(), "llmc_controller_routing_watchers") == 1);

  std::map<std::string, int> picks;
  for (int i = 0; i < 6; ++i) {
    auto picked = PickNow(router, "qwen");
    REQUIRE(picked.ok());
    CHECK_FALSE(picked->from_cache);
    ++picks[picked->worker_id];
  }
  // shortest_queue spreads a burst: the gateway counts its own picks at once.
  CHECK(picks["w0"] == 3);
  CHECK(picks["w1"] == 3);
  // The controller applied the reports: its counts match, and it was never asked to pick.
  REQUIRE(WaitUntil([&] { return TotalPicks(controller.ListWorkers()) == 6; }, absl::Seconds(10)));
  CHECK(ScrapeMetric(controller.metrics_port(), "llmc_controller_gateway_picks_total",
                     {{"model", "qwen"}, {"policy", "shortest_queue"}}) == 6);
  CHECK_FALSE(ScrapeMetric(controller.metrics_port(), "llmc_controller_picks_total").has_value());
  // Once the controller's table shows every report applied, the gateway counts each pick once.
  REQUIRE(WaitUntil([&] { return router.replica().num_local_picks() == 0; }, absl::Seconds(10)));
  CHECK(router.replica().Workers()[0].picks_since_heartbeat() == 3);
  CHECK(TotalPicks(router.replica().Workers()) == 6);

  // A worker that leaves is gone from the gateway's table, and unknown models are NOT_FOUND.
  grpc::ClientContext context;
  v1::DeregisterWorkerRequest leave;
  leave.set_worker_id("w0");
  v1::DeregisterWorkerResponse left;
  REQUIRE(controller.controller().DeregisterWorker(&context, leave, &left).ok());
  REQUIRE(WaitUntil([&] { return router.replica().Workers().size() == 1; }, absl::Seconds(10)));
  CHECK(PickNow(router, "qwen")->worker_id == "w1");
  CHECK(PickNow(router, "llama").status().code() == absl::StatusCode::kNotFound);
  router.Stop();
}

TEST_CASE("routing feed: gateways see each other's picks, for load and for prefixes", "[integration][routing]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {"--heartbeat_interval=1h", "--dispatch_policy=prefix_aware"});
  RegisterWorkers(controller, 4);
  WorkerRouter first(controller.address(), absl::Seconds(1), {}, absl::Seconds(1), TestClusterCredentials());
  WorkerRouter second(controller.address(), absl::Seconds(1), {}, absl::Seconds(1), TestClusterCredentials());
  first.Start();
  second.Start();
  REQUIRE(WaitUntil([&] { return first.watching() && second.watching(); }, absl::Seconds(10)));
  REQUIRE(WaitUntil([&] { return second.replica().Workers().size() == 4; }, absl::Seconds(10)));
  CHECK(second.replica().policy_name() == "prefix_aware");

  const std::vector<uint64_t> hashes = {501, 502, 503, 504, 505, 506, 507, 508};
  auto picked = PickNow(first, "qwen", hashes);
  REQUIRE(picked.ok());
  // The second gateway's table counts the first one's pick...
  REQUIRE(WaitUntil([&] { return TotalPicks(second.replica().Workers()) == 1; }, absl::Seconds(10)));
  // ...and, once the worker's heartbeat shows it no longer queued, sends the same prefix there.
  Heartbeat(controller, picked->worker_id);
  REQUIRE(WaitUntil([&] { return TotalPicks(second.replica().Workers()) == 0; }, absl::Seconds(10)));
  auto followed = PickNow(second, "qwen", hashes);
  REQUIRE(followed.ok());
  CHECK(followed->worker_id == picked->worker_id);
  // A different prefix goes elsewhere: that worker now has a pick queued.
  auto other = PickNow(second, "qwen", {901, 902, 903});
  REQUIRE(other.ok());
  CHECK(other->worker_id != picked->worker_id);
  first.Stop();
  second.Stop();
}

TEST_CASE("routing feed: while the controller is away the gateway picks from its last table",
          "[integration][routing]") {
  auto controller = std::make_unique<ControllerProcess>(LLMC_CONTROLLER_BINARY, kQuietHeartbeats);
  RegisterWorkers(*controller, 1);
  WorkerRouter router(controller->address(), absl::Milliseconds(200), {}, absl::Seconds(1), TestClusterCredentials());
  router.Start();
  REQUIRE(WaitUntil([&] { return router.watching() && router.replica().Workers().size() == 1; }, absl::Seconds(10)));
  controller.reset();
  REQUIRE(WaitUntil([&] { return !router.watching(); }, absl::Seconds(10)));
  auto picked = PickNow(router, "qwen");
  REQUIRE(picked.ok());
  CHECK(picked->worker_id == "w0");
  CHECK(picked->from_cache);
  router.Stop();
}

TEST_CASE("routing feed: in one process (Abseil's lock-order checks on), watching, picking and stopping",
          "[integration][routing]") {
  // The test binaries keep Mutex deadlock detection, which the programs turn off: this runs the feed, its
  // streams and two routers under it, and stops the controller while they watch.
  config::ControllerConfig config;
  config.listen_address = "127.0.0.1:0";
  config.metrics_address = "";
  config.heartbeat_interval = absl::Hours(1);
  auto server = std::make_unique<controller::ControllerServer>(config);
  REQUIRE(server->Start().ok());
  const std::string address = server->grpc_address().ToString();
  auto stub = v1::Controller::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::RegisterWorkerResponse response;
    REQUIRE(stub->RegisterWorker(&context,
                                 MakeRegistration("w" + std::to_string(i), "127.0.0.1:" + std::to_string(30101 + i),
                                                  "qwen", /*max_running=*/4),
                                 &response)
                .ok());
  }
  WorkerRouter first(address, absl::Milliseconds(200));
  WorkerRouter second(address, absl::Milliseconds(200));
  first.Start();
  second.Start();
  REQUIRE(WaitUntil([&] { return first.watching() && second.watching(); }, absl::Seconds(10)));
  for (int i = 0; i < 12; ++i) REQUIRE(PickNow(i % 2 == 0 ? first : second, "qwen", {1, 2, 3}).ok());
  REQUIRE(WaitUntil(
      [&] {
        return first.replica().num_local_picks() == 0 && second.replica().num_local_picks() == 0 &&
               TotalPicks(first.replica().Workers()) == 12 && TotalPicks(second.replica().Workers()) == 12;
      },
      absl::Seconds(10)));
  server->Shutdown();
  REQUIRE(WaitUntil([&] { return !first.watching() && !second.watching(); }, absl::Seconds(10)));
  CHECK(PickNow(first, "qwen")->from_cache);
  server.reset();
  first.Stop();
  second.Stop();
  CHECK(PickNow(first, "qwen").status().code() == absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace llmc::gateway
