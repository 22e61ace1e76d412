// The registry's side of the routing feed: full and incremental tables, reported picks, relaying.
#include <algorithm>
#include <string>
#include <vector>

#include "tests/controller/registry_test_support.h"
#include "tests/support/catch.h"

namespace llmc::controller {
namespace {

using testing::MakeRegistration;

constexpr uint64_t kGatewayA = 11;
constexpr uint64_t kGatewayB = 22;

std::vector<std::string> Ids(const v1::RoutingUpdate& update) {
  std::vector<std::string> ids;
  for (const auto& worker : update.workers()) ids.push_back(worker.worker_id());
  std::sort(ids.begin(), ids.end());
  return ids;
}

v1::ReportPicksRequest Report(uint64_t gateway, uint64_t seq, const std::string& worker, const std::string& model,
                              std::vector<uint64_t> hashes = {}) {
  v1::ReportPicksRequest report;
  report.set_gateway_id(gateway);
  report.set_seq(seq);
  v1::ReportedPick& pick = *report.add_picks();
  pick.set_worker_id(worker);
  pick.set_model(model);
  pick.mutable_prefix_hashes()->Add(hashes.begin(), hashes.end());
  return report;
}

const v1::WorkerInfo& Find(const v1::RoutingUpdate& update, const std::string& id) {
  const auto it = std::find_if(update.workers().begin(), update.workers().end(),
                               [&](const v1::WorkerInfo& info) { return info.worker_id() == id; });
  REQUIRE(it != update.workers().end());
  return *it;
}

TEST_CASE("routing changes: the first update is the whole table, later ones only what changed",
          "[unit][registry][routing]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "qwen")).ok());
  REQUIRE(registry->Register(MakeRegistration("w2", "10.0.0.2:1", "qwen")).ok());
  uint64_t version = 0;
  const v1::RoutingUpdate full = registry->Changes(kGatewayA, 0, version);
  CHECK(full.full());
  CHECK(Ids(full) == std::vector<std::string>{"w1", "w2"});
  CHECK(version > 0);

  uint64_t next = 0;
  CHECK(Ids(registry->Changes(kGatewayA, version, next)).empty());
  CHECK(next == version);

  REQUIRE(registry->Heartbeat(MakeHeartbeat("w2", 3, 1)).ok());
  const v1::RoutingUpdate delta = registry->Changes(kGatewayA, version, next);
  CHECK_FALSE(delta.full());
  CHECK(Ids(delta) == std::vector<std::string>{"w2"});
  CHECK(Find(delta, "w2").load().num_waiting() == 3);
  CHECK(Find(delta, "w2").heartbeats() == 1);
  version = next;

  CHECK(registry->Deregister("w1").value());
  const v1::RoutingUpdate removal = registry->Changes(kGatewayA, version, next);
  CHECK(Ids(removal).empty());
  REQUIRE(removal.removed_worker_ids_size() == 1);
  CHECK(removal.removed_worker_ids(0) == "w1");
  CHECK(registry->AwaitChange(next, absl::Milliseconds(1)) == next);
}

TEST_CASE("routing changes: an empty registry sends one full table, then nothing until something changes",
          "[unit][registry][routing]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  uint64_t version = 0;
  const v1::RoutingUpdate full = registry->Changes(kGatewayA, 0, version);
  CHECK(full.full());
  CHECK(full.workers().empty());
  CHECK(version > 0);  // a gateway at 0 would get the whole table again and again
  uint64_t next = 0;
  const v1::RoutingUpdate none = registry->Changes(kGatewayA, version, next);
  CHECK_FALSE(none.full());
  CHECK(none.workers().empty());
  CHECK(next == version);
  CHECK(registry->AwaitChange(version, absl::Milliseconds(1)) == version);
}

TEST_CASE("routing changes: a gateway too far behind the kept history gets the whole table again",
          "[unit][registry][routing]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "qwen")).ok());
  uint64_t behind = 0;
  registry->Changes(kGatewayA, 0, behind);
  // More removals than the registry keeps (4,096).
  for (int i = 0; i < 5000; ++i) {
    const std::string id = "brief-" + std::to_string(i);
    REQUIRE(registry->Register(MakeRegistration(id, "10.0.0.9:1", "qwen")).ok());
    REQUIRE(registry->Deregister(id).value());
  }
  uint64_t next = 0;
  const v1::RoutingUpdate update = registry->Changes(kGatewayA, behind, next);
  CHECK(update.full());
  CHECK(Ids(update) == std::vector<std::string>{"w1"});
}

TEST_CASE("routing changes: a worker that changed many times is sent once, as it is now", "[unit][registry][routing]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "qwen")).ok());
  REQUIRE(registry->Register(MakeRegistration("w2", "10.0.0.2:1", "qwen")).ok());
  uint64_t version_a = 0, version_b = 0, next = 0;
  registry->Changes(kGatewayA, 0, version_a);
  for (int i = 0; i < 1000; ++i) REQUIRE(registry->Heartbeat(MakeHeartbeat("w1", i, 0)).ok());
  registry->Changes(kGatewayB, 0, version_b);  // another gateway's update in between
  REQUIRE(registry->Heartbeat(MakeHeartbeat("w1", 5000, 0)).ok());
  REQUIRE(registry->Pick("qwen", {}).ok());
  const v1::RoutingUpdate delta = registry->Changes(kGatewayA, version_a, next);
  CHECK_FALSE(delta.full());
  REQUIRE(Ids(delta).size() >= 1);
  CHECK(Find(delta, "w1").load().num_waiting() == 5000);
  CHECK(std::count_if(delta.workers().begin(), delta.workers().end(),
                      [](const v1::WorkerInfo& info) { return info.worker_id() == "w1"; }) == 1);
  // Gateway B sees only what changed after its update.
  const v1::RoutingUpdate for_b = registry->Changes(kGatewayB, version_b, next);
  CHECK(Find(for_b, "w1").load().num_waiting() == 5000);
}

TEST_CASE("routing changes: a restarted worker comes back under a new registration number",
          "[unit][registry][routing]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "qwen")).ok());
  uint64_t version = 0;
  const uint64_t first = Find(registry->Changes(kGatewayA, 0, version), "w1").registration();
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "qwen")).ok());
  uint64_t next = 0;
  const v1::RoutingUpdate update = registry->Changes(kGatewayA, version, next);
  CHECK(Find(update, "w1").registration() > first);
  CHECK(update.removed_worker_ids().empty());
}

TEST_CASE("routing changes: reported picks count against the worker, are acknowledged and relayed to others",
          "[unit][registry][routing]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "qwen")).ok());
  uint64_t version_a = 0, version_b = 0;
  registry->Changes(kGatewayA, 0, version_a);
  registry->Changes(kGatewayB, 0, version_b);

  const auto applied = registry->ApplyReportedPicks(Report(kGatewayA, 7, "w1", "qwen", {1, 2, 3}));
  CHECK(applied.at("qwen") == 1);
  CHECK(registry->ListWorkers()[0].picks_since_heartbeat() == 1);

  uint64_t next = 0;
  const v1::RoutingUpdate for_a = registry->Changes(kGatewayA, version_a, next);
  CHECK(for_a.applied_report_seq() == 7);
  CHECK(for_a.remote_picks().empty());  // its own picks are not sent back
  CHECK(Find(for_a, "w1").picks_since_heartbeat() == 1);

  const v1::RoutingUpdate for_b = registry->Changes(kGatewayB, version_b, next);
  CHECK(for_b.applied_report_seq() == 0);
  REQUIRE(for_b.remote_picks_size() == 1);
  CHECK(for_b.remote_picks(0).worker_id() == "w1");
  CHECK(for_b.remote_picks(0).prefix_hashes_size() == 3);

  // Picks of workers that left, or of models they do not serve, are skipped (and not counted by model).
  CHECK(registry->ApplyReportedPicks(Report(kGatewayA, 8, "gone", "qwen")).empty());
  CHECK(registry->ApplyReportedPicks(Report(kGatewayA, 9, "w1", "made-up")).empty());
  CHECK(registry->ListWorkers()[0].picks_since_heartbeat() == 1);
  CHECK(registry->Changes(kGatewayA, version_a, next).applied_report_seq() == 9);

  // The controller's own picks (PickWorker) go to every gateway, while gateways watch.
  registry->SetWatchers(2);
  REQUIRE(registry->Changes(kGatewayA, 0, version_a).full());
  const std::vector<uint64_t> hashes = {4, 5};
  REQUIRE(registry->Pick("qwen", {}, hashes).ok());
  const v1::RoutingUpdate picked = registry->Changes(kGatewayA, version_a, next);
  REQUIRE(picked.remote_picks_size() == 1);
  CHECK(picked.remote_picks(0).prefix_hashes_size() == 2);
  CHECK(picked.remote_picks(0).model() == "qwen");

  // A heartbeat reports the worker's own queue, which now holds those requests.
  REQUIRE(registry->Heartbeat(MakeHeartbeat("w1", 1, 0)).ok());
  CHECK(registry->ListWorkers()[0].picks_since_heartbeat() == 0);
}

TEST_CASE("routing changes: prefix_aware learns from reported picks as from its own", "[unit][registry][routing]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "prefix_aware");
  for (const char* id : {"w1", "w2", "w3", "w4"}) {
    REQUIRE(registry->Register(MakeRegistration(id, std::string("10.0.0.1:") + (id + 1), "qwen")).ok());
  }
  const std::vector<uint64_t> hashes = {101, 102, 103, 104, 105, 106, 107, 108};
  registry->ApplyReportedPicks(Report(kGatewayA, 1, "w3", "qwen", hashes));
  REQUIRE(registry->Heartbeat(MakeHeartbeat("w3", 0, 0)).ok());  // the pick is no longer queued load
  for (int i = 0; i < 3; ++i) {
    auto picked = registry->Pick("qwen", {}, hashes);
    REQUIRE(picked.ok());
    CHECK(picked->worker_id == "w3");
    REQUIRE(registry->Heartbeat(MakeHeartbeat("w3", 0, 0)).ok());
  }
}

}  // namespace
}  // namespace llmc::controller
