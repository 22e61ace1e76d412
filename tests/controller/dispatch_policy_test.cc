#include <cmath>
#include <map>

#include "tests/controller/registry_test_support.h"
#include "tests/support/catch.h"

namespace llmc::controller {
namespace {

using testing::MakeRegistration;

std::map<std::string, int> CountPicks(WorkerRegistry& registry, int picks) {
  std::map<std::string, int> counts;
  for (int i = 0; i < picks; ++i) ++counts[registry.Pick("m", {}).value().worker_id];
  return counts;
}

TEST_CASE("lottery: picks follow capacity x speed within statistical bounds", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "lottery");
  REQUIRE(registry->Register(MakeRegistration("small", "10.0.0.1:1", "m", 1)).ok());
  REQUIRE(registry->Register(MakeRegistration("medium", "10.0.0.2:1", "m", 2)).ok());
  auto fast = MakeRegistration("fast", "10.0.0.3:1", "m", 2);
  fast.set_speed_weight(2.5);  // weight 5
  REQUIRE(registry->Register(fast).ok());

  constexpr int kPicks = 80000;
  const auto counts = CountPicks(*registry, kPicks);
  const std::map<std::string, double> expected = {{"small", 1.0 / 8}, {"medium", 2.0 / 8}, {"fast", 5.0 / 8}};
  for (const auto& [id, p] : expected) {
    // Binomial: within 4.5 standard deviations fails by chance about once in 150,000 runs.
    const double mean = kPicks * p;
    const double sd = std::sqrt(kPicks * p * (1 - p));
    INFO(id << " picked " << counts.at(id) << " times, expected " << mean << " +- " << 4.5 * sd);
    CHECK(std::abs(counts.at(id) - mean) < 4.5 * sd);
  }
}

TEST_CASE("lottery: the same seed gives the same sequence", "[unit][dispatch]") {
  ManualClock clock;
  auto first = MakeRegistry(clock, "lottery");
  auto second = MakeRegistry(clock, "lottery");
  for (auto* registry : {first.get(), second.get()}) {
    for (int i = 0; i < 5; ++i) {
      REQUIRE(registry->Register(MakeRegistration("w" + std::to_string(i), "10.0.0.1:1", "m")).ok());
    }
  }
  for (int i = 0; i < 200; ++i) CHECK(first->Pick("m", {})->worker_id == second->Pick("m", {})->worker_id);
}

TEST_CASE("power_of_two: never picks the busier of two, and spreads a burst", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "power_of_two");
  REQUIRE(registry->Register(MakeRegistration("idle", "10.0.0.1:1", "m", 8)).ok());
  REQUIRE(registry->Register(MakeRegistration("busy", "10.0.0.2:1", "m", 8)).ok());
  REQUIRE(registry->Heartbeat(MakeHeartbeat("busy", 30, 8, 8)).ok());
  // With two workers both are always drawn: the idle one wins until its picks make it as loaded (38).
  for (int i = 0; i < 30; ++i) CHECK(registry->Pick("m", {})->worker_id == "idle");

  for (int i = 0; i < 4; ++i) {
    REQUIRE(registry->Register(MakeRegistration("w" + std::to_string(i), "10.0.0.3:1", "m", 8)).ok());
  }
  REQUIRE(registry->Deregister("idle").value());
  REQUIRE(registry->Deregister("busy").value());
  const auto counts = CountPicks(*registry, 400);
  for (const auto& [id, count] : counts) {
    INFO(id);
    CHECK(count >= 90);  // 100 each when perfectly even; two choices keep it close
    CHECK(count <= 110);
  }
  CHECK(MakeDispatchPolicy("power_of_two", 1).value()->name() == "power_of_two");
}

TEST_CASE("shortest_queue: a burst of 100 picks spreads over equal workers to within one", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  for (int i = 0; i < 4; ++i) {
    REQUIRE(registry->Register(MakeRegistration("w" + std::to_string(i), "10.0.0.1:1", "m", 8)).ok());
  }
  const auto counts = CountPicks(*registry, 100);
  REQUIRE(counts.size() == 4);
  for (const auto& [id, count] : counts) {
    INFO(id);
    CHECK(count >= 24);
    CHECK(count <= 26);
  }
}

TEST_CASE("shortest_queue: load is relative to capacity and heartbeats reset the pick count", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("big", "10.0.0.1:1", "m", 16)).ok());
  REQUIRE(registry->Register(MakeRegistration("small", "10.0.0.2:1", "m", 4)).ok());
  REQUIRE(registry->Heartbeat(MakeHeartbeat("big", 4, 8, 16)).ok());   // 12 / 16 = 0.75
  REQUIRE(registry->Heartbeat(MakeHeartbeat("small", 0, 2, 4)).ok());  // 2 / 4 = 0.5
  CHECK(registry->Pick("m", {})->worker_id == "small");                // 0.75 after the pick
  // Both at 0.75 now: further picks alternate as each pick raises the chosen worker's load.
  const auto counts = CountPicks(*registry, 20);
  CHECK(counts.at("big") == 16);   // (12 + 16) / 16 = 1.75
  CHECK(counts.at("small") == 4);  // (3 + 4) / 4 = 1.75

  // A heartbeat replaces counted picks with the worker's own report.
  REQUIRE(registry->Heartbeat(MakeHeartbeat("big", 0, 0, 16)).ok());
  CHECK(registry->Pick("m", {})->worker_id == "big");
}

TEST_CASE("shortest_queue: ties are broken at random", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("a", "10.0.0.1:1", "m")).ok());
  REQUIRE(registry->Register(MakeRegistration("b", "10.0.0.2:1", "m")).ok());
  std::map<std::string, int> first_picks;
  for (int i = 0; i < 400; ++i) {
    ++first_picks[registry->Pick("m", {})->worker_id];
    REQUIRE(registry->Heartbeat(MakeHeartbeat("a", 0, 0)).ok());
    REQUIRE(registry->Heartbeat(MakeHeartbeat("b", 0, 0)).ok());
  }
  // Fair coin over 400 flips: 200 +- 50 is beyond 5 standard deviations.
  CHECK(first_picks["a"] > 150);
  CHECK(first_picks["b"] > 150);
}

TEST_CASE("dispatch: unknown policy names are refused", "[unit][dispatch]") {
  CHECK(MakeDispatchPolicy("round_robin", 1).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(MakeDispatchPolicy("lottery", 1).value()->name() == "lottery");
  CHECK(MakeDispatchPolicy("shortest_queue", 0).value()->name() == "shortest_queue");
}

}  // namespace
}  // namespace llmc::controller
