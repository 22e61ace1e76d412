#include "tests/controller/registry_test_support.h"
#include "tests/support/catch.h"

namespace llmc::controller {
namespace {

using testing::MakeRegistration;

TEST_CASE("registry: a registered worker is listed with its models and load", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen,llama", 16)).ok());

  const auto workers = registry->ListWorkers();
  REQUIRE(workers.size() == 1);
  CHECK(workers[0].worker_id() == "w1");
  CHECK(workers[0].address() == "10.0.0.1:21002");
  CHECK(workers[0].models_size() == 2);
  CHECK(workers[0].load().max_running() == 16);
  CHECK(workers[0].state() == v1::WORKER_STATE_READY);
  CHECK(registry->ListWorkers("llama").size() == 1);
  CHECK(registry->ListWorkers("other").empty());

  const auto models = registry->ListModels();
  REQUIRE(models.size() == 2);
  CHECK(models[0].info().name() == "llama");
  CHECK(models[0].num_workers() == 1);
  CHECK(models[0].num_ready() == 1);
  CHECK(models[1].info().name() == "qwen");
}

TEST_CASE("registry: registering again with the same id replaces the entry", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen")).ok());
  REQUIRE(registry->Pick("qwen", {}).ok());
  clock.Advance(absl::Seconds(1));
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.9:31002", "llama")).ok());

  const auto workers = registry->ListWorkers();
  REQUIRE(workers.size() == 1);
  CHECK(workers[0].address() == "10.0.0.9:31002");
  CHECK(workers[0].picks_since_heartbeat() == 0);
  CHECK(workers[0].registered_age_ms() == 0);
  CHECK(registry->Pick("qwen", {}).status().code() == absl::StatusCode::kNotFound);
  CHECK(registry->Pick("llama", {})->address == "10.0.0.9:31002");
}

TEST_CASE("registry: malformed registrations are INVALID_ARGUMENT and change nothing", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "lottery");
  for (const char* address : {"", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:99999", "not a host:80", "[::1:80"}) {
    INFO(address);
    const absl::Status status = registry->Register(MakeRegistration("w1", address, "qwen"));
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(status.message()), Catch::Contains("address"));
  }
  CHECK(registry->Register(MakeRegistration("", "10.0.0.1:1", "qwen")).code() == absl::StatusCode::kInvalidArgument);
  CHECK(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "")).code() == absl::StatusCode::kInvalidArgument);
  CHECK(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "a,a")).code() == absl::StatusCode::kInvalidArgument);
  auto negative_weight = MakeRegistration("w1", "10.0.0.1:1", "a");
  negative_weight.set_speed_weight(-1);
  CHECK(registry->Register(negative_weight).code() == absl::StatusCode::kInvalidArgument);
  CHECK(registry->ListWorkers().empty());
}

TEST_CASE("registry: heartbeats update load and state, unknown workers are told so", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  CHECK(registry->Heartbeat(MakeHeartbeat("ghost", 0, 0)).value() == HeartbeatOutcome::kUnknownWorker);
  CHECK(registry->Heartbeat(MakeHeartbeat("", 0, 0)).status().code() == absl::StatusCode::kInvalidArgument);

  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen")).ok());
  REQUIRE(registry->Pick("qwen", {}).ok());
  clock.Advance(absl::Seconds(2));
  REQUIRE(registry->Heartbeat(MakeHeartbeat("w1", 3, 5)).value() == HeartbeatOutcome::kAccepted);
  auto worker = registry->ListWorkers()[0];
  CHECK(worker.load().num_waiting() == 3);
  CHECK(worker.load().num_running() == 5);
  CHECK(worker.picks_since_heartbeat() == 0);
  CHECK(worker.last_heartbeat_age_ms() == 0);

  REQUIRE(registry->Heartbeat(MakeHeartbeat("w1", 0, 0, 8, v1::WORKER_STATE_DRAINING)).ok());
  CHECK(registry->ListWorkers()[0].state() == v1::WORKER_STATE_DRAINING);
  // UNSPECIFIED keeps the state it had.
  REQUIRE(registry->Heartbeat(MakeHeartbeat("w1", 0, 0)).ok());
  CHECK(registry->ListWorkers()[0].state() == v1::WORKER_STATE_DRAINING);
}

TEST_CASE("registry: expiry follows the injected clock", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue", absl::Seconds(6));
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen")).ok());
  REQUIRE(registry->Register(MakeRegistration("w2", "10.0.0.2:21002", "qwen")).ok());

  clock.Advance(absl::Seconds(4));
  REQUIRE(registry->Heartbeat(MakeHeartbeat("w2", 0, 0)).ok());
  clock.Advance(absl::Seconds(2));  // w1 exactly at the limit: still alive
  CHECK(registry->ExpireSilent().empty());
  clock.Advance(absl::Milliseconds(1));
  CHECK(registry->ExpireSilent() == std::vector<std::string>{"w1"});
  REQUIRE(registry->ListWorkers().size() == 1);
  CHECK(registry->ListWorkers()[0].worker_id() == "w2");

  clock.Advance(absl::Seconds(10));
  CHECK(registry->ExpireSilent() == std::vector<std::string>{"w2"});
  CHECK(registry->ListModels().empty());
}

TEST_CASE("registry: a silent worker is neither picked nor accepted before the sweep runs", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue", absl::Seconds(6));
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen")).ok());
  clock.Advance(absl::Seconds(7));
  CHECK(registry->Pick("qwen", {}).status().code() == absl::StatusCode::kUnavailable);
  CHECK(registry->ListModels().empty());
  CHECK(registry->Heartbeat(MakeHeartbeat("w1", 0, 0)).value() == HeartbeatOutcome::kUnknownWorker);
  CHECK(registry->ListWorkers().empty());
}

TEST_CASE("registry: NOT_FOUND for unknown models, UNAVAILABLE when no worker can take one", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  // No worker at all is a cluster starting: retryable, not "no such model".
  auto none = registry->Pick("qwen", {});
  CHECK(none.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(none.status().message()), Catch::Contains("no worker is registered"));

  auto starting = MakeRegistration("w1", "10.0.0.1:21002", "qwen");
  starting.set_state(v1::WORKER_STATE_STARTING);
  REQUIRE(registry->Register(starting).ok());
  REQUIRE(registry->Register(MakeRegistration("w2", "10.0.0.2:21002", "qwen")).ok());
  auto unknown = registry->Pick("mistral", {});
  CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(unknown.status().message()), Catch::Contains("available: qwen"));

  // w1 is starting, so only w2 can be picked.
  for (int i = 0; i < 10; ++i) CHECK(registry->Pick("qwen", {})->worker_id == "w2");
  CHECK(registry->Pick("qwen", {"w2"}).status().code() == absl::StatusCode::kUnavailable);

  REQUIRE(registry->Heartbeat(MakeHeartbeat("w2", 0, 0, 8, v1::WORKER_STATE_DRAINING)).ok());
  auto draining = registry->Pick("qwen", {});
  CHECK(draining.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(draining.status().message()), Catch::Contains("2 starting or draining"));
  CHECK(registry->ListModels()[0].num_workers() == 2);
  CHECK(registry->ListModels()[0].num_ready() == 0);

  REQUIRE(registry->Heartbeat(MakeHeartbeat("w1", 0, 0, 8, v1::WORKER_STATE_READY)).ok());
  CHECK(registry->Pick("qwen", {})->worker_id == "w1");
}

TEST_CASE("registry: deregistration removes the worker at once", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "lottery");
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen")).ok());
  CHECK(registry->Deregister("w1").value());
  CHECK_FALSE(registry->Deregister("w1").value());
  CHECK(registry->Pick("qwen", {}).status().code() == absl::StatusCode::kUnavailable);
  CHECK(registry->ListWorkers().empty());
}

TEST_CASE("registry: the routing table says it is warming for a while after start", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  uint64_t version = 0;
  CHECK_FALSE(registry->Changes(1, 0, version).warming());
  registry->StartWarming(absl::Seconds(6));
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen")).ok());
  CHECK(registry->warming());
  CHECK(registry->Changes(1, 0, version).warming());
  // A model no worker has registered again yet is retryable while warming, and unknown after.
  const auto pick = registry->Pick("mistral", {});
  CHECK(pick.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(pick.status().message()), Catch::Contains("started moments ago"));
  clock.Advance(absl::Seconds(6));
  CHECK_FALSE(registry->warming());
  CHECK_FALSE(registry->Changes(1, 0, version).warming());
  CHECK(registry->Pick("mistral", {}).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace llmc::controller
