// Fault tests: the real llmc-controller, llmc-worker and llmc-gateway processes on loopback ports, with
// faults injected into one worker (LLMC_FAULT_INJECTION, common/fault_injection.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

std::string ChatBody(int max_tokens) {
  return json({{"model", kSmallModelName},
               {"messages", json::array({{{"role", "user"}, {"content", "Say something."}}})},
               {"max_tokens", max_tokens},
               {"temperature", 0}})
      .dump();
}

double WorkerRunning(WorkerProcess& worker) {
  return ScrapeMetric(worker.metrics_port(), "llmc:num_requests_running").value_or(-1);
}

v1::WorkerState StateOf(ControllerProcess& controller, const std::string& worker_id) {
  for (const v1::WorkerInfo& worker : controller.ListWorkers()) {
    if (worker.worker_id() == worker_id) return worker.state();
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

TEST_CASE("fault: a worker whose model steps keep failing leaves rotation, the gateway retries elsewhere, none fail",
          "[integration][fault]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess healthy(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "healthy"));
  WorkerProcess failing(LLMC_WORKER_BINARY, SmallModelPackage(),
                        SmallWorkerArgs(controller.address(), "failing", {"--max_consecutive_failed_steps=2"}),
                        absl::Seconds(120), {"LLMC_FAULT_INJECTION=model_step"});
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 2; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());

  // Every request succeeds: a pick of the failing worker ends INTERNAL before any token, and the gateway
  // moves on. After two such steps the worker reports UNHEALTHY and gets no more picks.
  int sent = 0;
  for (; sent < 40 && StateOf(controller, "failing") != v1::WORKER_STATE_UNHEALTHY; ++sent) {
    const HttpReply reply = PostJson(gateway.port(), "/v1/chat/completions", ChatBody(3));
    INFO("request " << sent << ": " << reply.status << " " << reply.body);
    REQUIRE(reply.status == 200);
  }
  INFO("gateway log:\n" << gateway.process().ReadLog() << "\nfailing worker log:\n" << failing.process().ReadLog());
  REQUIRE(WaitUntil([&] { return StateOf(controller, "failing") == v1::WORKER_STATE_UNHEALTHY; }, absl::Seconds(10)));
  CHECK(ScrapeMetric(gateway.port(), "llmc_gateway_worker_retries_total").value_or(0) >= 2);
  CHECK(failing.HealthStatus("") == grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  CHECK(failing.HealthStatus("llmc.v1.Worker") == grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  CHECK(StateOf(controller, "healthy") == v1::WORKER_STATE_READY);

  // Out of rotation: the rest go to the healthy worker without a retry.
  const double retries = ScrapeMetric(gateway.port(), "llmc_gateway_worker_retries_total").value_or(0);
  const double served_before = ScrapeMetric(healthy.metrics_port(), "llmc:request_success_total").value_or(0);
  for (int i = 0; i < 6; ++i) CHECK(PostJson(gateway.port(), "/v1/chat/completions", ChatBody(3)).status == 200);
  CHECK(ScrapeMetric(gateway.port(), "llmc_gateway_worker_retries_total").value_or(0) == retries);
  CHECK(ScrapeMetric(healthy.metrics_port(), "llmc:request_success_total").value_or(0) == served_before + 6);
  CHECK(failing.process().running());
}

TEST_CASE("fault: the gateway drops its channel to a worker that left the cluster", "[integration][fault]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess staying(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "staying"));
  auto leaving = std::make_unique<WorkerProcess>(LLMC_WORKER_BINARY, SmallModelPackage(),
                                                 SmallWorkerArgs(controller.address(), "leaving"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 2; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());
  const auto channels = [&] { return ScrapeMetric(gateway.port(), "llmc_gateway_worker_channels").value_or(-1); };
  // Enough requests that both workers get some (the dispatch policy spreads them).
  for (int i = 0; i < 12; ++i) REQUIRE(PostJson(gateway.port(), "/v1/chat/completions", ChatBody(2)).status == 200);
  REQUIRE(WaitUntil([&] { return channels() == 2; }, absl::Seconds(5)));
  // The gateway process picked from the table the controller streams and reported every pick; it never
  // had to ask the controller to pick.
  CHECK(WaitUntil(
      [&] { return ScrapeMetric(controller.metrics_port(), "llmc_controller_gateway_picks_total").value_or(0) == 12; },
      absl::Seconds(10)));
  CHECK_FALSE(ScrapeMetric(controller.metrics_port(), "llmc_controller_picks_total").has_value());

  leaving->process().Signal(SIGTERM);  // drains, deregisters and exits
  REQUIRE(leaving->process().WaitForExit(absl::Seconds(30)).has_value());
  leaving.reset();
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 1; }, absl::Seconds(10)));
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(WaitUntil([&] { return channels() == 1; }, absl::Seconds(5)));
  CHECK(PostJson(gateway.port(), "/v1/chat/completions", ChatBody(2)).status == 200);
}

TEST_CASE("fault: a worker stopped mid-stream (SIGSTOP): its client gets a timeout error, the others are served",
          "[integration][fault]") {
  // The controller keeps the stopped worker READY (its missing heartbeats would give it away only after a
  // minute), and the lottery keeps picking it: the gateway has to notice on its own.
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {"--heartbeat_interval=1s", "--expiry_missed_heartbeats=60",
                                                        "--dispatch_policy=lottery", "--dispatch_seed=7"});
  WorkerProcess first(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "first"));
  WorkerProcess second(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "second"));
  GatewayProcess gateway(
      LLMC_GATEWAY_BINARY, controller.address(),
      {"--routing_refresh_interval=200ms", "--request_timeout=5s", "--worker_accept_timeout=1s", "--log_level=debug"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 2; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());

  json body = json::parse(ChatBody(1500));
  body["stream"] = true;
  body["ignore_eos"] = true;
  SseClient stalled(gateway.port(), "/v1/chat/completions", body.dump());
  REQUIRE(stalled.status() == 200);
  REQUIRE(stalled.NextEvent().has_value());
  WorkerProcess* serving = nullptr;
  REQUIRE(WaitUntil(
      [&] {
        serving = WorkerRunning(first) == 1 ? &first : WorkerRunning(second) == 1 ? &second : nullptr;
        return serving != nullptr;
      },
      absl::Seconds(10)));
  REQUIRE(serving->process().StopAndWait(absl::Seconds(10)));
  // Continued before the processes are stopped at the end, whatever fails in between.
  struct Continue {
    WorkerProcess* worker;
    ~Continue() { worker->process().Signal(SIGCONT); }
  } continue_at_end{serving};

  // New requests: those picked for the stopped worker move on when it does not accept them in time.
  for (int i = 0; i < 12; ++i) {
    const HttpReply reply = PostJson(gateway.port(), "/v1/chat/completions", ChatBody(3));
    if (reply.status != 200) {
      FAIL("request " << i << ": " << reply.status << " " << reply.body << "\ngateway log:\n"
                      << gateway.process().ReadLog());
    }
  }
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(ScrapeMetric(gateway.port(), "llmc_gateway_worker_retries_total").value_or(0) >= 1);

  // The stalled stream ends at the request timeout with an error event, not silently and not never.
  const std::vector<std::string> rest = stalled.ReadAll(absl::Seconds(60));
  INFO("last events of the stalled stream: " << (rest.empty() ? "(none)" : rest.back()));
  CHECK(stalled.complete());
  const auto error_event = std::find_if(
      rest.begin(), rest.end(), [](const std::string& event) { return event.find("\"error\"") != std::string::npos; });
  REQUIRE(error_event != rest.end());
  CHECK(json::parse(*error_event)["error"]["type"] == "timeout_error");
}

// A raw connection with a small receive buffer, so the kernel absorbs little of what the gateway sends: it
// sends its requests, then reads as slowly as a test wants, or just closes.
class RawClient {
 public:
  // Sends a chat completion request with `body`, then `more` (another request, whole or in part).
  RawClient(int port, const std::string& body, const std::string& more = "") {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int small = 4096;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(static_cast<uint16_t>(port));
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) == 0;
    const std::string request =
        absl::StrCat("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
                     "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body, more);
    connected_ = connected_ && send(fd_, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size());
  }
  ~RawClient() { close(fd_); }

  bool connected() const { return connected_; }
  // Reads one byte, then sleeps a millisecond, `count` times at most; returns the bytes read.
  int64_t ReadSlowly(int count) {
    int64_t total = 0;
    char byte;
    for (int i = 0; i < count; ++i) {
      if (recv(fd_, &byte, 1, 0) != 1) break;
      ++total;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return total;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

TEST_CASE("fault: a client reading 1 byte/ms holds little gateway memory and does not hold up the others",
          "[integration][fault]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "worker"));
  // A small kernel send buffer, so what the slow reader does not take stays in the gateway, not the kernel.
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=200ms", "--socket_send_buffer_bytes=16384"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 1; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());

  // Four choices of 1500 tokens make well over a megabyte of events; the reader takes a few kilobytes.
  json slow_body = json::parse(ChatBody(1500));
  slow_body["stream"] = true;
  slow_body["ignore_eos"] = true;
  slow_body["n"] = 4;
  RawClient slow(gateway.port(), slow_body.dump());
  REQUIRE(slow.connected());
  std::atomic<bool> reading{true};
  std::thread reader([&] {
    slow.ReadSlowly(5000);
    reading = false;
  });

  // Others stream to completion meanwhile.
  double most_queued = 0;
  for (int i = 0; i < 3; ++i) {
    json body = json::parse(ChatBody(40));
    body["stream"] = true;
    body["ignore_eos"] = true;
    SseClient client(gateway.port(), "/v1/chat/completions", body.dump());
    REQUIRE(client.status() == 200);
    const std::vector<std::string> events = client.ReadAll();
    CHECK(client.complete());
    REQUIRE(!events.empty());
    CHECK(events.back() == "[DONE]");
    most_queued = std::max(most_queued, ScrapeMetric(gateway.port(), "llmc_gateway_queued_response_bytes").value_or(0));
  }
  for (int i = 0; i < 50 && reading; ++i) {
    most_queued = std::max(most_queued, ScrapeMetric(gateway.port(), "llmc_gateway_queued_response_bytes").value_or(0));
    absl::SleepFor(absl::Milliseconds(100));
  }
  reader.join();
  INFO("most response bytes queued in the gateway: " << most_queued);
  // Back-pressure keeps it near 16 KiB (without it, 845 KB had piled up by the end of this test).
  CHECK(most_queued > 0);
  CHECK(most_queued <= 256 * 1024);
}

TEST_CASE("fault: ten times more streams than a worker holds, slow readers and hang-ups mixed in, end cleanly",
          "[integration][fault]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  // Eight places in all: four running, four waiting; 80 clients at once.
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(),
                       SmallWorkerArgs(controller.address(), "worker", {"--max_running=4", "--max_waiting=4"}));
  // A short idle timeout closes the slow readers' connections soon after a refusal.
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=200ms", "--socket_send_buffer_bytes=16384", "--idle_timeout=2s"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 1; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());

  constexpr int kClients = 80;
  struct Outcome {
    int status = 0;
    bool slow = false;
    bool done = false;         // a 200 stream that ended with [DONE] and no error event
    bool retry_after = false;  // a 429 that says when to come back
    std::string detail;
  };
  std::vector<Outcome> outcomes(kClients);
  std::atomic<double> most_queued{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      Outcome& outcome = outcomes[i];
      json body = json::parse(ChatBody(i % 8 == 0 ? 400 : 24));
      body["stream"] = true;
      body["ignore_eos"] = true;
      if (i % 8 == 0) {  // a slow reader that gives up after a while
        outcome.slow = true;
        RawClient slow(gateway.port(), body.dump());
        slow.ReadSlowly(1500);
        return;
      }
      SseClient client(gateway.port(), "/v1/chat/completions", body.dump(), {{"Connection", "close"}});
      outcome.status = client.status();
      if (client.status() == 200) {
        const std::vector<std::string> events = client.ReadAll(absl::Seconds(120));
        const bool error = std::any_of(events.begin(), events.end(), [](const std::string& event) {
          return event.find("\"error\"") != std::string::npos;
        });
        outcome.done = client.complete() && !events.empty() && events.back() == "[DONE]" && !error;
        if (!outcome.done) outcome.detail = events.empty() ? client.error() : events.back();
      } else {
        outcome.retry_after = !client.Header("Retry-After").empty();
        outcome.detail = client.ReadBody();
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    double seen = ScrapeMetric(gateway.port(), "llmc_gateway_queued_response_bytes").value_or(0);
    double before = most_queued.load();
    while (seen > before && !most_queued.compare_exchange_weak(before, seen)) {
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (std::thread& client : clients) client.join();

  int served = 0, refused = 0;
  for (int i = 0; i < kClients; ++i) {
    const Outcome& outcome = outcomes[i];
    if (outcome.slow) continue;
    INFO("client " << i << ": " << outcome.status << " " << outcome.detail);
    if (outcome.status == 200) {
      CHECK(outcome.done);
      ++served;
    } else {
      // Queue full is the only acceptable refusal: retryable, with Retry-After.
      CHECK(outcome.status == 429);
      CHECK(outcome.retry_after);
      ++refused;
    }
  }
  INFO("served " << served << ", refused " << refused << "; most bytes queued in the gateway " << most_queued.load());
  // Some are served (the slow readers may hold most of the eight places), and the rest are refused.
  CHECK(served >= 1);
  CHECK(refused >= 1);
  CHECK(most_queued.load() <= 1024 * 1024);
  // Nothing is left behind: the slow readers' requests were aborted when they hung up.
  INFO("worker log:\n" << worker.process().ReadLog());
  CHECK(WaitUntil([&] { return WorkerRunning(worker) == 0; }, absl::Seconds(60)));
  CHECK(PostJson(gateway.port(), "/v1/chat/completions", ChatBody(3)).status == 200);
}

TEST_CASE("fault: a client that pipelines a large request and leaves is noticed while its first one runs",
          "[integration][fault]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "worker"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 1; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());

  // A long non-streaming answer writes nothing until it ends, and 100 KB of a next request fill the
  // gateway's read-ahead: only a hang-up check can see the client close.
  json first = json::parse(ChatBody(3000));
  first["ignore_eos"] = true;
  const std::string first_body = first.dump();
  const std::string pipelined =
      absl::StrCat("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                   "Content-Length: 200000\r\n\r\n", std::string(100000, ' '));
  {
    RawClient client(gateway.port(), first_body, pipelined);
    REQUIRE(client.connected());
    REQUIRE(WaitUntil([&] { return WorkerRunning(worker) == 1; }, absl::Seconds(30)));
  }  // closes the connection

  REQUIRE(WaitUntil([&] { return WorkerRunning(worker) == 0; }, absl::Seconds(120)));
  INFO("gateway log:\n" << gateway.process().ReadLog());
  const auto ended = [&](const std::string& reason) {
    return ScrapeMetric(worker.metrics_port(), "llmc:request_success_total", {{"finished_reason", reason}})
        .value_or(-1);
  };
  CHECK(ended("abort") == 1);
  CHECK(ended("length") == 0);
}

}  // namespace
}  // namespace llmc::testing
