// Integration tests: the real llmc-controller binary on free loopback ports, with fake workers speaking
// the real gRPC protocol to it.
#include "tests/support/controller_process.h"

#include <signal.h>

#include <fstream>

#include "absl/time/clock.h"
#include "tests/support/catch.h"
#include "tests/support/fake_worker.h"
#include "tests/support/http_get.h"
#include "tests/support/wait.h"

namespace llmc::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr absl::Duration kHeartbeat = absl::Milliseconds(200);
const std::vector<std::string> kFastHeartbeats = {"--heartbeat_interval=200ms", "--expiry_missed_heartbeats=3"};

grpc::Status Pick(ControllerProcess& controller, const std::string& model, v1::PickWorkerResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::PickWorkerRequest request;
  request.set_model(model);
  return controller.controller().PickWorker(&context, request, response);
}

TEST_CASE("controller process: health service answers for the server and the Controller service",
          "[integration][controller]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  CHECK(controller.HealthStatus("") == HealthCheckResponse::SERVING);
  CHECK(controller.HealthStatus("llmc.v1.Controller") == HealthCheckResponse::SERVING);
  CHECK(controller.HealthStatus("no.such.Service") == -static_cast<int>(grpc::StatusCode::NOT_FOUND));
}

TEST_CASE("controller process: workers register, get picked, and unknown models are NOT_FOUND",
          "[integration][controller]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, kFastHeartbeats);
  FakeWorker worker(controller.address(), MakeRegistration("worker-a", "127.0.0.1:31001", "qwen"), kHeartbeat);
  worker.Start();
  REQUIRE(WaitUntil([&] { return Listed(controller, "worker-a"); }, absl::Seconds(10)));

  v1::PickWorkerResponse picked;
  REQUIRE(Pick(controller, "qwen", &picked).ok());
  CHECK(picked.worker_id() == "worker-a");
  CHECK(picked.address() == "127.0.0.1:31001");

  const grpc::Status unknown = Pick(controller, "no-such-model", &picked);
  CHECK(unknown.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_THAT(unknown.error_message(), Catch::Contains("no-such-model"));

  const grpc::Status empty = Pick(controller, "", &picked);
  CHECK(empty.error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext context;
  v1::ListModelsResponse models;
  REQUIRE(controller.controller().ListModels(&context, v1::ListModelsRequest(), &models).ok());
  REQUIRE(models.models_size() == 1);
  CHECK(models.models(0).info().name() == "qwen");
  CHECK(models.models(0).num_ready() == 1);
}

TEST_CASE("controller process: malformed addresses are refused with INVALID_ARGUMENT", "[integration][controller]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  for (const char* address : {"no-port", "127.0.0.1:0", "bad host:1"}) {
    grpc::ClientContext context;
    v1::RegisterWorkerResponse response;
    const grpc::Status status =
        controller.controller().RegisterWorker(&context, MakeRegistration("w", address, "qwen"), &response);
    INFO(address);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("address"));
  }
  CHECK(controller.ListWorkers().empty());
  CHECK(controller.process().running());
}

TEST_CASE("controller process: a silenced worker expires, a live one does not", "[integration][controller]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, kFastHeartbeats);  // expiry after 600 ms
  FakeWorker steady(controller.address(), MakeRegistration("steady", "127.0.0.1:31002", "qwen"), kHeartbeat);
  FakeWorker silenced(controller.address(), MakeRegistration("silenced", "127.0.0.1:31003", "qwen"), kHeartbeat);
  steady.Start();
  silenced.Start();
  REQUIRE(WaitUntil([&] { return Listed(controller, "steady") && Listed(controller, "silenced"); }, absl::Seconds(10)));

  // Heartbeats keep both alive across several expiry periods.
  const absl::Time alive_until = absl::Now() + absl::Seconds(2);
  while (absl::Now() < alive_until) {
    REQUIRE(controller.ListWorkers().size() == 2);
    absl::SleepFor(absl::Milliseconds(50));
  }

  silenced.Silence();
  const absl::Time silenced_at = absl::Now();
  REQUIRE(WaitUntil([&] { return !Listed(controller, "silenced"); }, absl::Seconds(10)));
  const absl::Duration took = absl::Now() - silenced_at;
  INFO("expired after " << absl::FormatDuration(took));
  // The last heartbeat may have gone out up to an interval (plus scheduling delay) before Silence().
  CHECK(took >= absl::Milliseconds(600) - 2 * kHeartbeat);
  CHECK(Listed(controller, "steady"));
  CHECK(silenced.successful_registrations() == 1);

  v1::PickWorkerResponse picked;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(Pick(controller, "qwen", &picked).ok());
    CHECK(picked.worker_id() == "steady");
  }

  const HttpResponse metrics = HttpGet("127.0.0.1", controller.metrics_port(), "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK_THAT(metrics.body, Catch::Contains("llmc_controller_workers_expired_total 1"));
}

TEST_CASE("controller process: a restarted controller gets the worker back on its next heartbeat",
          "[integration][controller]") {
  auto first = std::make_unique<ControllerProcess>(LLMC_CONTROLLER_BINARY, kFastHeartbeats);
  const int port = first->grpc_port();
  FakeWorker worker(first->address(), MakeRegistration("worker-r", "127.0.0.1:31004", "qwen"), kHeartbeat);
  worker.Start();
  REQUIRE(WaitUntil([&] { return Listed(*first, "worker-r") && worker.successful_registrations() >= 1; },
                    absl::Seconds(10)));
  REQUIRE(worker.successful_registrations() == 1);

  first->process().Signal(SIGTERM);
  REQUIRE(first->process().WaitForExit(absl::Seconds(10)) == 0);
  first.reset();

  ControllerProcess second(LLMC_CONTROLLER_BINARY, kFastHeartbeats, port);
  REQUIRE(WaitUntil([&] { return Listed(second, "worker-r"); }, absl::Seconds(10)));
  // The controller lists the worker as it answers the registration; the worker counts it when the answer
  // arrives, a moment later on a loaded machine.
  REQUIRE(WaitUntil([&] { return worker.successful_registrations() >= 2; }, absl::Seconds(10)));
  CHECK(worker.successful_registrations() == 2);
  v1::PickWorkerResponse picked;
  REQUIRE(Pick(second, "qwen", &picked).ok());
  CHECK(picked.address() == "127.0.0.1:31004");
}

TEST_CASE("controller process: draining workers are not picked and load steers shortest_queue",
          "[integration][controller]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, kFastHeartbeats);
  FakeWorker busy(controller.address(), MakeRegistration("busy", "127.0.0.1:31005", "qwen"), kHeartbeat);
  FakeWorker idle(controller.address(), MakeRegistration("idle", "127.0.0.1:31006", "qwen"), kHeartbeat);
  v1::WorkerLoad heavy;
  heavy.set_max_running(8);
  heavy.set_num_running(8);
  heavy.set_num_waiting(20);
  busy.SetLoad(heavy);
  busy.Start();
  idle.Start();
  REQUIRE(WaitUntil([&] { return Listed(controller, "busy") && Listed(controller, "idle"); }, absl::Seconds(10)));

  v1::PickWorkerResponse picked;
  for (int i = 0; i < 5; ++i) {
    REQUIRE(Pick(controller, "qwen", &picked).ok());
    CHECK(picked.worker_id() == "idle");
  }

  idle.SetState(v1::WORKER_STATE_DRAINING);
  busy.SetState(v1::WORKER_STATE_DRAINING);
  REQUIRE(WaitUntil([&] { return Pick(controller, "qwen", &picked).error_code() == grpc::StatusCode::UNAVAILABLE; },
                    absl::Seconds(10)));
  CHECK(controller.ListWorkers().size() == 2);
}

TEST_CASE("controller process: /metrics reports workers per model and picks by policy", "[integration][controller]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {"--dispatch_policy=lottery", "--heartbeat_interval=200ms"});
  FakeWorker worker(controller.address(), MakeRegistration("worker-m", "127.0.0.1:31007", "qwen,llama"), kHeartbeat);
  worker.Start();
  REQUIRE(WaitUntil([&] { return Listed(controller, "worker-m"); }, absl::Seconds(10)));
  v1::PickWorkerResponse picked;
  for (int i = 0; i < 3; ++i) REQUIRE(Pick(controller, "qwen", &picked).ok());
  CHECK(Pick(controller, "unknown", &picked).error_code() == grpc::StatusCode::NOT_FOUND);

  const HttpResponse metrics = HttpGet("127.0.0.1", controller.metrics_port(), "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK_THAT(metrics.content_type, Catch::StartsWith("text/plain"));
  CHECK_THAT(metrics.body, Catch::Contains("llmc_controller_workers{model=\"qwen\",state=\"alive\"} 1"));
  CHECK_THAT(metrics.body, Catch::Contains("llmc_controller_workers{model=\"llama\",state=\"ready\"} 1"));
  CHECK_THAT(metrics.body,
             Catch::Contains("llmc_controller_picks_total{model=\"qwen\",policy=\"lottery\",result=\"ok\"} 3"));
  CHECK_THAT(metrics.body, Catch::Contains("result=\"not_found\"} 1"));
  CHECK(HttpGet("127.0.0.1", controller.metrics_port(), "/nope").status == 404);
  CHECK(HttpGet("127.0.0.1", controller.metrics_port(), "/health").status == 200);
}

TEST_CASE("controller process: SIGTERM and SIGINT stop it cleanly with exit code 0", "[integration][controller]") {
  for (int signal_number : {SIGTERM, SIGINT}) {
    ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
    controller.process().Signal(signal_number);
    INFO("signal " << signal_number);
    CHECK(controller.process().WaitForExit(absl::Seconds(10)) == 0);
    CHECK_THAT(controller.process().ReadLog(), Catch::Contains("controller stopped"));
  }
}

TEST_CASE("controller binary: --help, --print-config and a bad YAML key", "[integration][controller]") {
  const CommandResult help = RunCommand(LLMC_CONTROLLER_BINARY, {"--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("--heartbeat_interval=<duration>"));
  CHECK_THAT(help.output, Catch::Contains("--dispatch_policy=<string>"));

  const CommandResult printed = RunCommand(LLMC_CONTROLLER_BINARY, {"--print-config", "--dispatch_policy=lottery"});
  CHECK(printed.exit_code == 0);
  CHECK_THAT(printed.output, Catch::Contains("controller:"));
  CHECK_THAT(printed.output, Catch::Contains("dispatch_policy: lottery"));
  CHECK_THAT(printed.output, Catch::Contains("heartbeat_interval: 2s"));

  const std::string dir = MakeTempDir("llmc-badconfig");
  std::ofstream(dir + "/bad.yaml") << "controller:\n  heartbeat_interval: 1s\n  expiry_missed_heartbeat: 5\n";
  const CommandResult bad = RunCommand(LLMC_CONTROLLER_BINARY, {"--config", dir + "/bad.yaml"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("controller.expiry_missed_heartbeat: unknown key"));
  CHECK_THAT(bad.output, Catch::Contains("did you mean expiry_missed_heartbeats"));

  const CommandResult taken = RunCommand(LLMC_CONTROLLER_BINARY, {"--listen_address=256.1.1.1:1"});
  CHECK(taken.exit_code != 0);
}

TEST_CASE("worker and gateway binaries answer --help and --print-config", "[integration][config]") {
  for (const char* binary : {LLMC_WORKER_BINARY, LLMC_GATEWAY_BINARY}) {
    INFO(binary);
    const CommandResult help = RunCommand(binary, {"--help"});
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.output, Catch::Contains("--controller_address=<string>"));
    const CommandResult printed = RunCommand(binary, {"--print-config"});
    CHECK(printed.exit_code == 0);
    CHECK_THAT(printed.output, Catch::Contains("controller_address: 127.0.0.1:21001"));
  }
}

}  // namespace
}  // namespace llmc::testing
