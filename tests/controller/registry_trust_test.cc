// The registry against registrations from hosts other than a worker's own, and against oversized ones.
#include "tests/controller/registry_test_support.h"
#include "tests/support/catch.h"

namespace llmc::controller {
namespace {

using testing::MakeRegistration;

constexpr char kWorkerHost[] = "10.0.0.1";
constexpr char kOtherHost[] = "10.0.0.66";

TEST_CASE("registry trust: a live worker id cannot be taken over from another host", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue", absl::Seconds(6));
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen"), kWorkerHost).ok());

  const absl::Status takeover = registry->Register(MakeRegistration("w1", "10.0.0.66:21002", "qwen"), kOtherHost);
  CHECK(takeover.code() == absl::StatusCode::kAlreadyExists);
  CHECK_THAT(std::string(takeover.message()), Catch::Contains("another host"));
  CHECK(registry->Pick("qwen", {})->address == "10.0.0.1:21002");

  // Nor can another host keep it alive, change its state or remove it.
  auto heartbeat = registry->Heartbeat(MakeHeartbeat("w1", 0, 0, 8, v1::WORKER_STATE_DRAINING), kOtherHost);
  CHECK(heartbeat.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(registry->Deregister("w1", kOtherHost).status().code() == absl::StatusCode::kPermissionDenied);
  REQUIRE(registry->ListWorkers().size() == 1);
  CHECK(registry->ListWorkers()[0].state() == v1::WORKER_STATE_READY);

  // Its own host may re-register (a restart), heartbeat and deregister.
  clock.Advance(absl::Seconds(1));
  CHECK(registry->Heartbeat(MakeHeartbeat("w1", 0, 0), kWorkerHost).value() == HeartbeatOutcome::kAccepted);
  CHECK(registry->Register(MakeRegistration("w1", "10.0.0.1:21003", "qwen"), kWorkerHost).ok());
  CHECK(registry->Deregister("w1", kWorkerHost).value());
}

TEST_CASE("registry trust: an expired registration may be taken by another host", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue", absl::Seconds(6));
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:21002", "qwen"), kWorkerHost).ok());
  clock.Advance(absl::Seconds(7));  // silent past the expiry, not yet swept
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.2:21002", "qwen"), "10.0.0.2").ok());
  CHECK(registry->Pick("qwen", {})->address == "10.0.0.2:21002");
  // The old host is now the stranger.
  CHECK(registry->Deregister("w1", kWorkerHost).status().code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("registry trust: workers, models, weights and registration size are bounded", "[unit][registry]") {
  ManualClock clock;
  auto registry = std::make_unique<WorkerRegistry>(clock, absl::Seconds(6),
                                                   MakeDispatchPolicy("shortest_queue", kFixedSeed).value(),
                                                   /*max_workers=*/2);
  REQUIRE(registry->Register(MakeRegistration("w1", "10.0.0.1:1", "qwen")).ok());
  REQUIRE(registry->Register(MakeRegistration("w2", "10.0.0.2:1", "qwen")).ok());
  CHECK(registry->Register(MakeRegistration("w3", "10.0.0.3:1", "qwen")).code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(registry->Register(MakeRegistration("w2", "10.0.0.2:2", "qwen")).ok());  // a known id still may
  REQUIRE(registry->Deregister("w1").value());
  CHECK(registry->Register(MakeRegistration("w3", "10.0.0.3:1", "qwen")).ok());

  std::string many_models = "m0";
  for (int i = 1; i <= WorkerRegistry::kMaxModelsPerWorker; ++i) many_models += ",m" + std::to_string(i);
  CHECK(registry->Register(MakeRegistration("w2", "10.0.0.2:1", many_models)).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(registry->Register(MakeRegistration("w2", "10.0.0.2:1", std::string(300, 'm'))).code() ==
        absl::StatusCode::kInvalidArgument);

  auto heavy = MakeRegistration("w2", "10.0.0.2:1", "qwen");
  heavy.set_speed_weight(static_cast<float>(WorkerRegistry::kMaxSpeedWeight) * 2);
  CHECK(registry->Register(heavy).code() == absl::StatusCode::kInvalidArgument);
  heavy.set_speed_weight(static_cast<float>(WorkerRegistry::kMaxSpeedWeight));
  CHECK(registry->Register(heavy).ok());

  auto large = MakeRegistration("w2", "10.0.0.2:1", "qwen");
  large.set_version(std::string(WorkerRegistry::kMaxRegistrationBytes, 'v'));
  const absl::Status too_large = registry->Register(large);
  CHECK(too_large.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(too_large.message()), Catch::Contains("bytes"));
}

TEST_CASE("registry trust: a claimed capacity is capped", "[unit][registry]") {
  ManualClock clock;
  auto registry = MakeRegistry(clock, "shortest_queue");
  auto greedy = MakeRegistration("greedy", "10.0.0.1:1", "qwen", /*max_running=*/4'000'000'000u);
  greedy.mutable_load()->set_max_waiting(4'000'000'000u);
  REQUIRE(registry->Register(greedy).ok());
  const v1::WorkerInfo info = registry->ListWorkers()[0];
  CHECK(info.load().max_running() == dispatch::kMaxReportedCapacity);
  CHECK(info.load().max_waiting() == dispatch::kMaxReportedCapacity);
  REQUIRE(registry->Heartbeat(MakeHeartbeat("greedy", 0, 0, /*max_running=*/4'000'000'000u)).ok());
  CHECK(registry->ListWorkers()[0].load().max_running() == dispatch::kMaxReportedCapacity);
}

}  // namespace
}  // namespace llmc::controller
