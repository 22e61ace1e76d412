// Drain tests: SIGTERM to the real llmc-gateway and llmc-worker processes while streams run, on loopback
// ports with the small random-weight package.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/cluster_http.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/small_cluster.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

// A chat request that generates exactly `max_tokens` tokens (the random model's EOS is ignored).
std::string ExactLengthChatBody(int max_tokens, bool stream) {
  return json({{"model", kSmallModelName},
               {"messages", json::array({{{"role", "user"}, {"content", "Tell me a long story."}}})},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", stream}})
      .dump();
}

double RunningOn(WorkerProcess& worker) {
  return ScrapeMetric(worker.metrics_port(), "llmc:num_requests_running").value_or(-1);
}

// A stream whose first event has arrived, so that it is mid-flight when a test signals.
std::unique_ptr<SseClient> StartedStream(int port, int max_tokens) {
  auto stream = std::make_unique<SseClient>(port, kChatPath, ExactLengthChatBody(max_tokens, /*stream=*/true));
  REQUIRE(stream->status() == 200);
  const std::optional<std::string> first = stream->NextEvent(absl::Seconds(30));
  REQUIRE(first.has_value());
  REQUIRE(*first != "[DONE]");
  return stream;
}

// The finish_reason of the stream's last choice chunk, "" when none said one.
std::string FinishReasonOf(const std::vector<std::string>& events) {
  std::string reason;
  for (const std::string& event : events) {
    if (event == "[DONE]") continue;
    const json chunk = json::parse(event, nullptr, /*allow_exceptions=*/false);
    if (!chunk.is_object() || !chunk.contains("choices")) continue;
    for (const json& choice : chunk["choices"]) {
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) reason = choice["finish_reason"];
    }
  }
  return reason;
}

bool HasErrorEvent(const std::vector<std::string>& events) {
  return std::any_of(events.begin(), events.end(), [](const std::string& event) {
    const json parsed = json::parse(event, nullptr, /*allow_exceptions=*/false);
    return parsed.is_object() && parsed.contains("error");
  });
}

// The number after `prefix` in the first log line that has it; -1 when none does.
int RequestsLogged(const std::string& log, const std::string& prefix) {
  const size_t at = log.find(prefix);
  if (at == std::string::npos) return -1;
  return std::atoi(log.c_str() + at + prefix.size());
}

// A connection attempt that is refused (the listener closed) rather than answered.
bool Refused(int port) { return HttpCall(port, "GET", "/health", "", {}, absl::Seconds(2)).status == 0; }

TEST_CASE("drain: on SIGTERM the gateway refuses new connections, finishes the requests running and exits 0",
          "[integration][drain]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "drain-a"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=200ms", "--drain_grace_period=60s"});
  REQUIRE(gateway.WaitHealthy());

  // Seconds of generation: still running when the signal lands (the sanitized builds run several times slower).
  constexpr int kMaxTokens = kSanitized ? 300 : 1000;
  std::unique_ptr<SseClient> stream = StartedStream(gateway.port(), kMaxTokens);
  HttpReply whole;
  std::thread whole_client(
      [&] { whole = PostJson(gateway.port(), kChatPath, ExactLengthChatBody(kMaxTokens, false)); });
  REQUIRE(WaitUntil([&] { return RunningOn(worker) == 2; }, absl::Seconds(10)));

  gateway.process().Signal(SIGTERM);
  CHECK(WaitUntil([&] { return Refused(gateway.port()); }, absl::Seconds(5)));
  const std::vector<std::string> rest = stream->ReadAll(absl::Seconds(60));
  whole_client.join();
  const std::optional<int> exit_code = gateway.process().WaitForExit(absl::Seconds(30));
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(stream->complete());
  REQUIRE(!rest.empty());
  CHECK(rest.back() == "[DONE]");
  CHECK(FinishReasonOf(rest) == "length");
  CHECK_FALSE(HasErrorEvent(rest));
  REQUIRE(whole.status == 200);
  CHECK(whole.Header("Connection") == "close");
  CHECK(json::parse(whole.body)["choices"][0]["finish_reason"] == "length");
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);
  // The two requests were still running when the drain began (with, at most, the first probe for a refusal,
  // which may have come in before the listener closed).
  CHECK(RequestsLogged(gateway.process().ReadLog(), "draining: waiting up to 1m for ") >= 2);
}

TEST_CASE("drain: requests still running when the gateway's grace period ends get an error event or a 503",
          "[integration][drain]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "drain-b"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=200ms", "--drain_grace_period=1s"});
  REQUIRE(gateway.WaitHealthy());

  // Near the model's 4,096-token context: far longer than the grace period at the speeds this model runs.
  constexpr int kMaxTokens = 4000;
  std::unique_ptr<SseClient> stream = StartedStream(gateway.port(), kMaxTokens);
  HttpReply whole;
  std::thread whole_client(
      [&] { whole = PostJson(gateway.port(), kChatPath, ExactLengthChatBody(kMaxTokens, false)); });
  REQUIRE(WaitUntil([&] { return RunningOn(worker) == 2; }, absl::Seconds(10)));

  gateway.process().Signal(SIGTERM);
  const std::vector<std::string> rest = stream->ReadAll(absl::Seconds(30));
  whole_client.join();
  const std::optional<int> exit_code = gateway.process().WaitForExit(absl::Seconds(20));
  INFO("gateway log:\n" << gateway.process().ReadLog());
  // The stream ends as a failed generation does: the error envelope, then [DONE], then the last chunk.
  CHECK(stream->complete());
  CHECK(stream->framing_errors().empty());
  REQUIRE(rest.size() >= 2);
  CHECK(rest.back() == "[DONE]");
  const json error = json::parse(rest[rest.size() - 2]);
  REQUIRE(error.contains("error"));
  CHECK(error["error"]["type"] == "service_unavailable_error");
  CHECK(error["error"]["message"] == "the gateway is shutting down");
  CHECK(FinishReasonOf(rest).empty());
  // The non-streamed one gets a 503 the client may retry elsewhere.
  CHECK(whole.status == 503);
  CHECK(whole.Header("Retry-After") == "1");
  CHECK(whole.Header("Connection") == "close");
  CHECK_THAT(whole.body, Catch::Contains("service_unavailable_error"));
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);
  CHECK(RequestsLogged(gateway.process().ReadLog(), "drain grace period over: ending ") == 2);
  // The gateway cancelled its worker calls, so the worker lets go of both sequences.
  CHECK(WaitUntil([&] { return RunningOn(worker) == 0; }, absl::Seconds(10)));
}

TEST_CASE("drain: a worker's SIGTERM mid-stream lets its stream finish while new requests go to another worker",
          "[integration][drain]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess first(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "drain-c1"));
  WorkerProcess second(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "drain-c2"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 2; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());

  // Seconds of generation: still running when the signal lands (the sanitized builds run several times slower).
  constexpr int kMaxTokens = kSanitized ? 300 : 1000;
  std::unique_ptr<SseClient> stream = StartedStream(gateway.port(), kMaxTokens);
  WorkerProcess* serving = nullptr;
  REQUIRE(WaitUntil(
      [&] {
        serving = RunningOn(first) == 1 ? &first : RunningOn(second) == 1 ? &second : nullptr;
        return serving != nullptr;
      },
      absl::Seconds(10)));
  WorkerProcess& staying = serving == &first ? second : first;

  serving->process().Signal(SIGTERM);
  // New requests are served, by the other worker (or after a refusal, retried there), never refused.
  for (int i = 0; i < 6; ++i) {
    const HttpReply reply = PostJson(gateway.port(), kChatPath, ExactLengthChatBody(3, false), {}, absl::Seconds(30));
    INFO("request " << i << ": " << reply.status << " " << reply.body << "\ngateway log:\n"
                    << gateway.process().ReadLog());
    CHECK(reply.status == 200);
  }
  const std::vector<std::string> rest = stream->ReadAll(absl::Seconds(60));
  const std::optional<int> exit_code = serving->process().WaitForExit(absl::Seconds(40));
  INFO("draining worker log:\n" << serving->process().ReadLog());
  CHECK(stream->complete());
  REQUIRE(!rest.empty());
  CHECK(rest.back() == "[DONE]");
  CHECK(FinishReasonOf(rest) == "length");
  CHECK(ScrapeMetric(staying.metrics_port(), "llmc:request_success_total").value_or(0) >= 6);
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);
  CHECK_THAT(serving->process().ReadLog(), Catch::Contains("draining: waiting up to"));
}

}  // namespace
}  // namespace llmc::testing
