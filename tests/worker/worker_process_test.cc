// Integration tests: the real llmc-worker binary serving a tiny real model package on free loopback ports,
// registered with an in-process fake controller.
#include "tests/support/worker_process.h"

#include <signal.h>

#include <thread>

#include "absl/time/clock.h"
#include "tests/support/catch.h"
#include "tests/support/fake_controller.h"
#include "tests/support/http_get.h"
#include "tests/support/model_scenario.h"
#include "tests/support/wait.h"

namespace llmc::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr char kWorkerId[] = "worker-it";
constexpr absl::Duration kGrace = absl::Seconds(30);

std::string PackagePath() { return ParityFixture("float32") + "/package"; }

std::vector<std::string> WorkerArgs(const FakeController& controller) {
  return {"--controller_address=" + controller.address(),
          std::string("--worker_id=") + kWorkerId,
          "--device=cpu",
          "--kv_cache_bytes=16777216",
          "--max_running=16",
          "--heartbeat_interval=5s",  // the fake controller answers 200 ms, which must win
          "--drain_grace_period=" + absl::FormatDuration(kGrace)};
}

struct Stream {
  std::vector<int32_t> tokens;  // in index order; the test fails on a gap
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
  bool index_gap = false;
  int responses = 0;
  grpc::Status status;
};

v1::GenerateRequest Request(int i, uint32_t max_tokens) {
  v1::GenerateRequest request;
  request.set_request_id("it-" + std::to_string(i));
  request.set_model("tiny-parity");
  for (int k = 0; k < 4 + i % 5; ++k) request.mutable_prompt_token_ids()->add_ids(10 + 7 * i + k);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_ignore_eos(true);  // exact counts from a random model
  return request;
}

// Reads a whole stream; `first_read` is notified after the first message.
Stream Collect(v1::Worker::Stub& stub, const v1::GenerateRequest& request, std::atomic<int>* first_reads = nullptr) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto reader = stub.Generate(&context, request);
  Stream stream;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (stream.responses++ == 0 && first_reads != nullptr) ++*first_reads;
    for (const auto& delta : response.deltas()) {
      if (delta.index() != stream.tokens.size()) stream.index_gap = true;
      stream.tokens.insert(stream.tokens.end(), delta.token_ids().begin(), delta.token_ids().end());
      if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) stream.finish = delta.finish_reason();
    }
    if (response.has_usage()) stream.usage = response.usage();
  }
  stream.status = reader->Finish();
  return stream;
}

std::vector<Stream> RunConcurrently(v1::Worker::Stub& stub, int count, uint32_t max_tokens,
                                    std::atomic<int>* first_reads = nullptr) {
  std::vector<Stream> streams(count);
  std::vector<std::thread> clients;
  for (int i = 0; i < count; ++i) {
    clients.emplace_back([&, i] { streams[i] = Collect(stub, Request(i, max_tokens), first_reads); });
  }
  for (auto& client : clients) client.join();
  return streams;
}

void CheckComplete(const std::vector<Stream>& streams, uint32_t max_tokens) {
  for (size_t i = 0; i < streams.size(); ++i) {
    INFO("stream " << i << ": " << streams[i].status.error_message());
    REQUIRE(streams[i].status.ok());
    CHECK(!streams[i].index_gap);
    CHECK(streams[i].tokens.size() == max_tokens);
    CHECK(streams[i].finish == v1::FINISH_REASON_LENGTH);
    CHECK(streams[i].usage.completion_tokens() == max_tokens);
    CHECK(streams[i].usage.prompt_tokens() == 4 + i % 5);
  }
}

TEST_CASE("worker process: registers when ready, serves 16 concurrent streams, re-registers when forgotten",
          "[integration][worker]") {
  FakeController controller(absl::Milliseconds(200));
  WorkerProcess worker(LLMC_WORKER_BINARY, PackagePath(), WorkerArgs(controller));
  CHECK(worker.HealthStatus("llmc.v1.Worker") == HealthCheckResponse::SERVING);

  REQUIRE(WaitUntil([&] { return controller.registration_count() >= 1; }, absl::Seconds(10)));
  const v1::RegisterWorkerRequest registration = controller.registrations().front();
  CHECK(registration.worker_id() == kWorkerId);
  CHECK(registration.address() == worker.address());
  REQUIRE(registration.models_size() == 1);
  CHECK(registration.models(0).name() == "tiny-parity");
  CHECK(registration.models(0).max_context_length() == 2048);
  CHECK(registration.models(0).device() == "cpu");
  CHECK(registration.load().max_running() == 16);
  // Heartbeats come at the controller's 200 ms, not the configured 5 s.
  REQUIRE(WaitUntil([&] { return controller.heartbeat_count() >= 3; }, absl::Seconds(5)));

  constexpr uint32_t kMaxTokens = 24;
  CheckComplete(RunConcurrently(worker.worker(), 16, kMaxTokens), kMaxTokens);

  // Greedy decoding of the same prompt is reproducible across batches.
  const Stream again = Collect(worker.worker(), Request(3, kMaxTokens));
  const Stream alone = Collect(worker.worker(), Request(3, kMaxTokens));
  CHECK(again.tokens == alone.tokens);

  const HttpResponse metrics = HttpGet("127.0.0.1", worker.metrics_port(), "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK_THAT(metrics.body,
             Catch::Contains("llmc:request_success_total{finished_reason=\"length\",model_name=\"tiny-parity\"} 18"));
  CHECK_THAT(metrics.body, Catch::Contains("llmc:num_requests_running{model_name=\"tiny-parity\"} 0"));

  controller.Forget(kWorkerId);
  REQUIRE(WaitUntil([&] { return controller.registration_count() >= 2; }, absl::Seconds(5)));
  CHECK(controller.Knows(kWorkerId));
  CHECK(worker.process().running());
}

TEST_CASE("worker process: on SIGTERM in-flight streams complete, new ones are refused, it deregisters and exits 0",
          "[integration][worker]") {
  FakeController controller(absl::Milliseconds(200));
  WorkerProcess worker(LLMC_WORKER_BINARY, PackagePath(), WorkerArgs(controller));
  REQUIRE(WaitUntil([&] { return controller.registration_count() >= 1; }, absl::Seconds(10)));

  constexpr int kStreams = 4;
  constexpr uint32_t kMaxTokens = 1000;  // long enough to still be running when the signal lands
  std::atomic<int> first_reads{0};
  std::vector<Stream> streams;
  std::thread clients([&] { streams = RunConcurrently(worker.worker(), kStreams, kMaxTokens, &first_reads); });
  REQUIRE(WaitUntil([&] { return first_reads.load() == kStreams; }, absl::Seconds(30)));

  const absl::Time signalled = absl::Now();
  worker.process().Signal(SIGTERM);
  const bool reported_draining = WaitUntil(
      [&] {
        for (const auto& heartbeat : controller.heartbeats()) {
          if (heartbeat.state() == v1::WORKER_STATE_DRAINING) return true;
        }
        return false;
      },
      absl::Seconds(5));
  CHECK(reported_draining);
  // New work is refused, whether the server still answers (draining) or has already closed.
  const Stream late = Collect(worker.worker(), Request(7, 4));
  CHECK(late.status.error_code() == grpc::StatusCode::UNAVAILABLE);

  const std::optional<int> exit_code = worker.process().WaitForExit(kGrace + absl::Seconds(10));
  clients.join();
  INFO(worker.process().ReadLog());
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);
  CHECK(absl::Now() - signalled < kGrace);
  CheckComplete(streams, kMaxTokens);
  CHECK(controller.deregistrations() == std::vector<std::string>{kWorkerId});
  // The drain found work in flight (rather than the streams finishing before the signal landed).
  CHECK_THAT(worker.process().ReadLog(), Catch::Contains("draining: waiting up to"));
}

TEST_CASE("worker process: serves while the controller is unreachable", "[integration][worker]") {
  const std::string nowhere = "127.0.0.1:" + std::to_string(PickFreePort());
  WorkerProcess worker(LLMC_WORKER_BINARY, PackagePath(),
                       {"--controller_address=" + nowhere, "--device=cpu", "--kv_cache_bytes=16777216"});
  CheckComplete({Collect(worker.worker(), Request(0, 8))}, 8);
  CHECK(worker.process().running());
  CHECK_THAT(worker.process().ReadLog(), Catch::Contains("serving continues"));
}

TEST_CASE("worker process: a missing model_path or package is a clear error", "[integration][worker]") {
  const CommandResult no_path = RunCommand(LLMC_WORKER_BINARY, {"--metrics_address="});
  CHECK(no_path.exit_code == 2);
  CHECK_THAT(no_path.output, Catch::Contains("model_path is required"));

  const CommandResult missing =
      RunCommand(LLMC_WORKER_BINARY, {"--model_path=/nonexistent/package", "--listen_address=127.0.0.1:0",
                                      "--controller_address=", "--metrics_address="});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.output, Catch::Contains("/nonexistent/package"));
}

}  // namespace
}  // namespace llmc::testing
