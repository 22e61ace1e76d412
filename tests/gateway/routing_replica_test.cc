// The gateway's copy of the routing table: applying the controller's updates, picking from it, and
// counting its own picks exactly once while they travel to the controller and back.
#include "gateway/dispatch/routing_replica.h"

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

constexpr uint64_t kGateway = 5;

v1::WorkerInfo Worker(const std::string& id, uint32_t running, uint32_t picks = 0, uint64_t registration = 1) {
  v1::WorkerInfo info;
  info.set_worker_id(id);
  info.set_address("10.0.0.1:" + std::to_string(1000 + id.back()));
  info.add_models()->set_name("qwen");
  info.mutable_load()->set_num_running(running);
  info.mutable_load()->set_max_running(4);
  info.set_state(v1::WORKER_STATE_READY);
  info.set_picks_since_heartbeat(picks);
  info.set_registration(registration);
  return info;
}

v1::RoutingUpdate Full(const std::string& policy, std::vector<v1::WorkerInfo> workers) {
  v1::RoutingUpdate update;
  update.set_full(true);
  update.mutable_settings()->set_policy(policy);
  for (auto& worker : workers) *update.add_workers() = std::move(worker);
  return update;
}

uint32_t PicksOf(const RoutingReplica& replica, const std::string& id) {
  for (const auto& worker : replica.Workers()) {
    if (worker.worker_id() == id) return worker.picks_since_heartbeat();
  }
  FAIL("no worker " << id);
  return 0;
}

TEST_CASE("routing replica: picks nothing before the first full table", "[unit][routing]") {
  RoutingReplica replica(kGateway, 1);
  v1::RoutingUpdate delta;
  *delta.add_workers() = Worker("w1", 0);
  replica.Apply(delta);
  CHECK_FALSE(replica.has_table());
  CHECK(replica.Pick("qwen", {}, {}).status().code() == absl::StatusCode::kUnavailable);
  CHECK_FALSE(replica.TakeReport().has_value());
}

TEST_CASE("routing replica: a warming controller's table keeps the workers it does not list yet", "[unit][routing]") {
  RoutingReplica replica(kGateway, 1);
  replica.Apply(Full("shortest_queue", {Worker("w1", 0), Worker("w2", 0)}));
  // A restarted controller: nobody re-registered yet, then w1 did.
  v1::RoutingUpdate empty = Full("shortest_queue", {});
  empty.set_warming(true);
  replica.Apply(empty);
  CHECK(replica.Workers().size() == 2);
  CHECK(replica.Pick("qwen", {}, {}).ok());
  v1::RoutingUpdate partial = Full("shortest_queue", {Worker("w1", 0, 0, 2)});
  partial.set_warming(true);
  replica.Apply(partial);
  CHECK(replica.Workers().size() == 2);
  // A model none of them serves may be on a worker that has not registered again yet: retryable.
  CHECK(replica.Pick("llama", {}, {}).status().code() == absl::StatusCode::kUnavailable);
  // Warming over: the table is whole, and w2 never came back.
  replica.Apply(Full("shortest_queue", {Worker("w1", 0, 0, 2)}));
  REQUIRE(replica.Workers().size() == 1);
  CHECK(replica.Workers()[0].worker_id() == "w1");
  CHECK(replica.Pick("llama", {}, {}).status().code() == absl::StatusCode::kNotFound);
  // No worker at all is a cluster starting, not a model nobody serves.
  replica.Apply(Full("shortest_queue", {}));
  CHECK(replica.Pick("qwen", {}, {}).status().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("routing replica: picks as the controller would, spreading a burst by counting its picks",
          "[unit][routing]") {
  RoutingReplica replica(kGateway, 1);
  replica.Apply(Full("shortest_queue", {Worker("w1", 0), Worker("w2", 2)}));
  REQUIRE(replica.has_table());
  CHECK(replica.policy_name() == "shortest_queue");
  std::map<std::string, int> picks;
  for (int i = 0; i < 6; ++i) {
    auto picked = replica.Pick("qwen", {}, {});
    REQUIRE(picked.ok());
    ++picks[picked->worker_id];
    CHECK_FALSE(picked->from_cache);
  }
  // Loads 0 and 2 of 4: w1 takes picks until its count catches up, then they alternate.
  CHECK(picks["w1"] == 4);
  CHECK(picks["w2"] == 2);
  CHECK(replica.Pick("llama", {}, {}).status().code() == absl::StatusCode::kNotFound);
  CHECK(replica.Pick("qwen", {"w1", "w2"}, {}).status().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("routing replica: its picks count until the controller's table includes them, never twice",
          "[unit][routing]") {
  RoutingReplica replica(kGateway, 1);
  replica.Apply(Full("shortest_queue", {Worker("w1", 0)}));
  REQUIRE(replica.Pick("qwen", {}, {11, 12}).ok());
  REQUIRE(replica.Pick("qwen", {}, {}).ok());
  CHECK(PicksOf(replica, "w1") == 2);

  auto report = replica.TakeReport();
  REQUIRE(report.has_value());
  CHECK(report->gateway_id() == kGateway);
  CHECK(report->seq() == 1);
  REQUIRE(report->picks_size() == 2);
  CHECK(report->picks(0).worker_id() == "w1");
  CHECK(report->picks(0).model() == "qwen");
  CHECK(report->picks(0).prefix_hashes_size() == 2);
  CHECK_FALSE(replica.TakeReport().has_value());

  REQUIRE(replica.Pick("qwen", {}, {}).ok());  // goes in report 2
  CHECK(PicksOf(replica, "w1") == 3);
  CHECK(replica.num_local_picks() == 3);
  replica.ReportDone(1, /*applied=*/true);

  // The controller's table now has report 1's two picks.
  v1::RoutingUpdate update;
  *update.add_workers() = Worker("w1", 0, /*picks=*/2);
  update.set_applied_report_seq(1);
  replica.Apply(update);
  CHECK(PicksOf(replica, "w1") == 3);

  // Report 2 fails: the controller never counts its pick, so the copy does until the worker's heartbeat.
  report = replica.TakeReport();
  REQUIRE(report.has_value());
  CHECK(report->seq() == 2);
  replica.ReportDone(2, /*applied=*/false);
  CHECK(PicksOf(replica, "w1") == 3);
  v1::RoutingUpdate unrelated;
  *unrelated.add_workers() = Worker("w1", 0, /*picks=*/2);
  unrelated.set_applied_report_seq(1);
  replica.Apply(unrelated);
  CHECK(PicksOf(replica, "w1") == 3);

  // A heartbeat resets the controller's count and accounts for the failed report's pick.
  v1::RoutingUpdate heartbeat;
  *heartbeat.add_workers() = Worker("w1", 3, /*picks=*/0);
  heartbeat.mutable_workers(0)->set_heartbeats(1);
  heartbeat.set_applied_report_seq(1);
  replica.Apply(heartbeat);
  CHECK(PicksOf(replica, "w1") == 0);
}

TEST_CASE("routing replica: a new full table drops answered reports the controller lost", "[unit][routing]") {
  RoutingReplica replica(kGateway, 1);
  replica.Apply(Full("shortest_queue", {Worker("w1", 0)}));
  REQUIRE(replica.Pick("qwen", {}, {}).ok());
  auto report = replica.TakeReport();
  REQUIRE(report.has_value());
  replica.ReportDone(report->seq(), /*applied=*/true);
  REQUIRE(replica.Pick("qwen", {}, {}).ok());  // not reported yet
  CHECK(PicksOf(replica, "w1") == 2);
  // A restarted controller: nothing applied, no picks counted.
  replica.Apply(Full("shortest_queue", {Worker("w1", 0)}));
  CHECK(PicksOf(replica, "w1") == 1);
}

TEST_CASE("routing replica: removals, restarts and remote picks reach the policy", "[unit][routing]") {
  RoutingReplica replica(kGateway, 1);
  replica.Apply(Full("prefix_aware", {Worker("w1", 0), Worker("w2", 0), Worker("w3", 0)}));
  const std::vector<uint64_t> hashes = {7, 8, 9, 10, 11, 12};

  // Another gateway sent this prefix to w2: requests with it follow.
  v1::RoutingUpdate relayed;
  v1::ReportedPick& pick = *relayed.add_remote_picks();
  pick.set_worker_id("w2");
  pick.set_model("qwen");
  pick.mutable_prefix_hashes()->Add(hashes.begin(), hashes.end());
  replica.Apply(relayed);
  // Once a heartbeat shows that request no longer queued, the next with the prefix goes to w2.
  v1::RoutingUpdate heartbeat;
  *heartbeat.add_workers() = Worker("w2", 0);
  heartbeat.mutable_workers(0)->set_heartbeats(1);
  replica.Apply(heartbeat);
  REQUIRE(replica.Pick("qwen", {}, hashes)->worker_id == "w2");

  // w2 restarted (new registration): its cache is empty, so the prefix no longer draws requests to it. Its
  // KV use costs it 102 tokens' worth of score: less than the prefix would have won it, had it been kept.
  REQUIRE(replica.TakeReport().has_value());
  v1::RoutingUpdate restarted;
  *restarted.add_workers() = Worker("w2", 0, /*picks=*/0, /*registration=*/2);
  restarted.mutable_workers(0)->mutable_load()->set_kv_cache_usage(0.1f);
  restarted.set_applied_report_seq(1);
  replica.Apply(restarted);
  CHECK(replica.num_local_picks() == 0);
  auto picked = replica.Pick("qwen", {}, hashes);
  REQUIRE(picked.ok());
  CHECK(picked->worker_id != "w2");

  v1::RoutingUpdate removal;
  removal.add_removed_worker_ids("w1");
  removal.add_removed_worker_ids("w3");
  replica.Apply(removal);
  REQUIRE(replica.Workers().size() == 1);
  CHECK(replica.Pick("qwen", {}, hashes)->worker_id == "w2");

  // A full table without w2 removes it too.
  replica.Apply(Full("prefix_aware", {Worker("w4", 0)}));
  REQUIRE(replica.Workers().size() == 1);
  CHECK(replica.Workers()[0].worker_id() == "w4");
}

TEST_CASE("routing replica: a policy it does not know leaves it without a table", "[unit][routing]") {
  RoutingReplica replica(kGateway, 1);
  replica.Apply(Full("lottery", {Worker("w1", 0)}));
  replica.Apply(Full("from_the_future", {Worker("w1", 0)}));
  CHECK_FALSE(replica.has_table());
  CHECK(replica.Workers().empty());  // nothing stale is left to answer from
  replica.Apply(Full("lottery", {Worker("w1", 0)}));
  CHECK(replica.has_table());
  CHECK(replica.Pick("qwen", {}, {})->worker_id == "w1");
}

TEST_CASE("routing replica: prefix_aware drains a worker's queued prefill at the rate it reports", "[unit][routing]") {
  ManualClock clock;
  RoutingReplica replica(kGateway, 1, clock);
  replica.Apply(Full("prefix_aware", {Worker("w1", 0), Worker("w2", 0)}));
  const std::vector<uint64_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};  // 8 chunks: about 256 tokens
  const std::string home = replica.Pick("qwen", {}, prompt).value().worker_id;
  const std::string other = home == "w1" ? "w2" : "w1";
  // A heartbeat reaches the gateway: 2,000 prompt tokens queued at `home`, computed at 10,000 per second.
  const auto heartbeat = [&](float rate, uint64_t number) {
    v1::RoutingUpdate update;
    v1::WorkerInfo& info = *update.add_workers() = Worker(home, 0);
    info.mutable_load()->set_pending_prefill_tokens(2000);
    info.mutable_load()->set_prefill_tokens_per_second(rate);
    info.set_heartbeats(number);
    replica.Apply(update);
  };
  heartbeat(10000, 2);
  CHECK(replica.Pick("qwen", {}, {1, 2, 3, 4, 100, 101, 102, 103}).value().worker_id == other);
  // 0.2 s later the gateway counts that queue as computed, with no heartbeat in between.
  clock.Advance(absl::Milliseconds(200));
  CHECK(replica.Pick("qwen", {}, prompt).value().worker_id == home);
  // Reported without a rate, the queue stands.
  heartbeat(0, 3);
  clock.Advance(absl::Milliseconds(200));
  CHECK(replica.Pick("qwen", {}, prompt).value().worker_id == other);
}

}  // namespace
}  // namespace llmc::gateway
