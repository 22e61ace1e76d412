// Integration tests: the real llmc-gateway in front of the real llmc-controller and llmc-worker processes
// (the small random-weight model with the real Qwen3 vocabulary), all on free loopback ports.
#include <signal.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_http.h"
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

json Chat(int max_tokens, bool stream, const std::string& content = "Tell me a story about a lighthouse.") {
  return {{"model", kSmallModelName},
          {"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream}};
}

// A long generation that only max_tokens ends: a random model says EOS whenever it likes.
json LongStream(int max_tokens) {
  json body = Chat(max_tokens, true);
  body["ignore_eos"] = true;
  return body;
}

// A non-streaming chat answer with status 200 and one finished choice; returns the reply for more checks.
HttpReply ExpectChatOk(int port, int max_tokens = 4) {
  HttpReply reply = PostJson(port, kChatPath, Chat(max_tokens, false).dump());
  INFO("status " << reply.status << " " << reply.error << " body: " << reply.body);
  REQUIRE(reply.status == 200);
  const json answer = ParseJson(reply.body);
  CHECK(answer["object"] == "chat.completion");
  REQUIRE(answer["choices"].size() == 1);
  CHECK(answer["choices"][0]["message"]["role"] == "assistant");
  CHECK(answer["usage"]["completion_tokens"].get<int>() >= 1);
  CHECK(answer["usage"]["completion_tokens"].get<int>() <= max_tokens);
  return reply;
}

// Every event is JSON but the last, which is [DONE].
void CheckCompleteStream(const SseClient& client, const std::vector<std::string>& events) {
  INFO("error: " << client.error() << " raw: " << client.raw());
  CHECK(client.complete());
  CHECK(client.framing_errors().empty());
  REQUIRE(!events.empty());
  CHECK(events.back() == "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i], nullptr, false);
    CHECK(!chunk.is_discarded());
    CHECK(!chunk.contains("error"));
  }
}

double WorkerMetric(WorkerProcess& worker, const std::string& name, const MetricLabels& labels = {}) {
  return ScrapeMetric(worker.metrics_port(), name, labels).value_or(-1);
}

std::string SdkFolder() { return std::string(LLMC_TOKENIZER_MODULES) + "/node_modules/openai"; }

// The official OpenAI Node SDK's walk through models, chat, completions, streaming and errors
// (openai_sdk_e2e.mjs) against a cluster whose one worker serves `package`; returns the /v1/models entry.
json RunSdkEndToEnd(const std::string& package, const std::vector<std::string>& worker_flags = {}) {
  const std::string api_key = "sk-llmc-e2e-test";
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, package, SmallWorkerArgs(controller.address(), "sdk-worker", worker_flags));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--api_keys=other-key," + api_key, "--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());

  // /health needs no key; the API does.
  CHECK(HttpCall(gateway.port(), "GET", "/health").status == 200);
  const HttpReply anonymous = HttpCall(gateway.port(), "GET", "/v1/models");
  CHECK(anonymous.status == 401);
  CHECK(ParseJson(anonymous.body)["error"]["type"].is_string());

  const CommandResult result = RunCommand("/usr/bin/env",
                                          {"node", std::string(LLMC_SOURCE_DIR) + "/tests/gateway/openai_sdk_e2e.mjs",
                                           SdkFolder(), gateway.base_url(), kSmallModelName, api_key},
                                          absl::Seconds(240));
  INFO("node output:\n" << result.output << "\n(the SDK comes from scripts/fetch-tokenizers.sh)");
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("all steps passed"));
  const HttpReply models = HttpCall(gateway.port(), "GET", "/v1/models", "", {{"Authorization", "Bearer " + api_key}});
  REQUIRE(models.status == 200);
  const json listed = ParseJson(models.body)["data"];
  REQUIRE(listed.size() == 1);
  // The worker's metrics say the same.
  CHECK(WorkerMetric(worker, "llmc:model_info",
                     {{"quantization", listed[0]["quantization"].get<std::string>()},
                      {"dtype", listed[0]["dtype"].get<std::string>()}}) == 1);
  return listed[0];
}

TEST_CASE("gateway e2e: the official OpenAI Node SDK against controller, worker and gateway",
          "[integration][gateway]") {
  const json model = RunSdkEndToEnd(SmallModelPackage());
  CHECK(model["dtype"] == "bfloat16");
  CHECK(model["quantization"] == "none");
}

TEST_CASE("gateway e2e: a worker serving an int8 package answers the OpenAI SDK walk-through and says int8",
          "[integration][gateway][int8]") {
  const json model = RunSdkEndToEnd(SmallModelPackage("int8"));
  CHECK(model["quantization"] == "int8");
  CHECK(model["dtype"] == "bfloat16");
}

TEST_CASE("gateway e2e: a worker serving an int4 package answers the OpenAI SDK walk-through and says int4",
          "[integration][gateway][int4]") {
  const json model = RunSdkEndToEnd(SmallModelPackage("int4"));
  CHECK(model["quantization"] == "int4");
  CHECK(model["dtype"] == "bfloat16");
}

TEST_CASE("gateway e2e: a Qwen3-MoE package, bfloat16 and int4, answers the OpenAI SDK walk-through",
          "[integration][gateway][moe]") {
  for (const std::string quantize : {"none", "int4"}) {
    INFO("quantize " << quantize);
    const json model = RunSdkEndToEnd(SmallMoePackage(quantize));
    CHECK(model["quantization"] == quantize);
    CHECK(model["dtype"] == "bfloat16");
  }
}

TEST_CASE(
    "gateway e2e: a GPT-OSS-shaped package with GPT-OSS's tokenizer, bfloat16 and with MXFP4 experts, answers the "
    "OpenAI SDK walk-through",
    "[integration][gateway][moe]") {
  for (const std::string quantize : {"none", "mxfp4"}) {
    INFO(quantize);
    const json model = RunSdkEndToEnd(SmallGptOssPackage(quantize));
    CHECK(model["quantization"] == quantize);
    CHECK(model["dtype"] == "bfloat16");
  }
}

TEST_CASE("gateway e2e: a worker quantizing a bfloat16 package at load with int16 activations (w8a16) says w8a16",
          "[integration][gateway][int8]") {
  const json model = RunSdkEndToEnd(SmallModelPackage(), {"--quantization=w8a16"});
  CHECK(model["quantization"] == "w8a16");
  CHECK(model["dtype"] == "bfloat16");
}

TEST_CASE("gateway e2e: a worker serving int8 weights with int8 activations (w8a8) answers the SDK and says w8a8",
          "[integration][gateway][int8]") {
  const json model = RunSdkEndToEnd(SmallModelPackage("int8"), {"--quantization=w8a8"});
  CHECK(model["quantization"] == "w8a8");
}

TEST_CASE("gateway e2e: a W8A16 checkpoint from llm-compressor, exported as it is, answers the SDK and says w8a16",
          "[integration][gateway][int8]") {
  // No --quantization flag: the package's manifest asks for 16-bit activations, as vLLM serves W8A16.
  const json model = RunSdkEndToEnd(SmallW8A16CheckpointPackage());
  CHECK(model["quantization"] == "w8a16");
  CHECK(model["dtype"] == "bfloat16");
}

TEST_CASE(
    "gateway e2e: GPTQ with act-order, AWQ and compressed-tensors int4 checkpoints, exported as they are, answer the "
    "SDK and say int4",
    "[integration][gateway][int4]") {
  struct Checkpoint {
    std::string format;
    bool act_order;
  };
  for (const Checkpoint& checkpoint :
       {Checkpoint{"gptq", true}, Checkpoint{"awq", false}, Checkpoint{"compressed-tensors", false}}) {
    INFO(checkpoint.format << (checkpoint.act_order ? " with act-order" : ""));
    const json model = RunSdkEndToEnd(SmallInt4CheckpointPackage(checkpoint.format, checkpoint.act_order));
    CHECK(model["quantization"] == "int4");
    CHECK(model["dtype"] == "bfloat16");
  }
}

TEST_CASE("gateway e2e: a client that disconnects mid-stream frees the worker's sequence", "[integration][gateway]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "cut-worker"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());

  constexpr int kMaxTokens = 3000;
  {
    SseClient client(gateway.port(), kChatPath, LongStream(kMaxTokens).dump());
    REQUIRE(client.status() == 200);
    CHECK_THAT(client.Header("Content-Type"), Catch::StartsWith("text/event-stream"));
    for (int i = 0; i < 4; ++i) {
      const auto event = client.NextEvent(absl::Seconds(30));
      INFO("event " << i << " error: " << client.error());
      REQUIRE(event.has_value());
      REQUIRE(*event != "[DONE]");
    }
    REQUIRE(WaitUntil([&] { return WorkerMetric(worker, "llmc:num_requests_running") == 1; }, absl::Seconds(5)));
    client.Close();
  }

  const bool freed =
      WaitUntil([&] { return WorkerMetric(worker, "llmc:num_requests_running") == 0; }, absl::Seconds(5));
  INFO("gateway log:\n" << gateway.process().ReadLog() << "\nworker log:\n" << worker.process().ReadLog());
  CHECK(freed);
  // The worker aborted it rather than running to max_tokens.
  CHECK(WaitUntil(
      [&] {
        return WorkerMetric(worker, "llmc:request_success_total", {{"finished_reason", "abort"}}) == 1;
      },
      absl::Seconds(5)));
  CHECK(WorkerMetric(worker, "llmc:generation_tokens_total") < kMaxTokens);
  CHECK(WorkerMetric(worker, "llmc:request_success_total", {{"finished_reason", "length"}}) == 0);

  ExpectChatOk(gateway.port());
  // Neither the abandoned generation nor the finished one is kept alive in the gateway.
  CHECK(WaitUntil([&] { return ScrapeMetric(gateway.port(), "llmc_gateway_requests_in_flight").value_or(-1) == 0; },
                  absl::Seconds(5)));
}

TEST_CASE("gateway e2e: an overloaded worker gets 429 with Retry-After, the rest complete, none hang",
          "[integration][gateway]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(),
                       SmallWorkerArgs(controller.address(), "busy-worker", {"--max_running=1", "--max_waiting=1"}));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=200ms", "--retry_after_seconds=3"});
  REQUIRE(gateway.WaitHealthy());

  constexpr int kClients = 8;
  struct Outcome {
    int status = 0;
    std::string retry_after, body, error, raw;
    std::vector<std::string> events;
    bool complete = false, framing_ok = false;
  };
  std::vector<Outcome> outcomes(kClients);
  std::atomic<int> ready{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      ++ready;
      WaitUntil([&] { return ready.load() == kClients; }, absl::Seconds(5), absl::Milliseconds(1));
      SseClient client(gateway.port(), kChatPath, LongStream(48).dump(), {}, absl::Seconds(60));
      Outcome& outcome = outcomes[i];
      outcome.status = client.status();
      outcome.retry_after = client.Header("Retry-After");
      if (client.status() == 200) {
        outcome.events = client.ReadAll(absl::Seconds(90));
        outcome.complete = client.complete();
        outcome.framing_ok = client.framing_errors().empty();
      } else {
        outcome.body = client.ReadBody(absl::Seconds(10));
      }
      outcome.error = client.error();
      outcome.raw = client.raw();
    });
  }
  for (auto& client : clients) client.join();

  int rejected = 0, completed = 0;
  for (int i = 0; i < kClients; ++i) {
    const Outcome& outcome = outcomes[i];
    INFO("client " << i << ": status " << outcome.status << " error " << outcome.error << " raw " << outcome.raw
                   << " body " << outcome.body);
    if (outcome.status == 429) {
      ++rejected;
      CHECK(outcome.retry_after == "3");
      const json envelope = ParseJson(outcome.body);
      CHECK(envelope["error"]["message"].is_string());
      CHECK(envelope["error"]["type"].is_string());
      CHECK(envelope["error"].contains("param"));
      CHECK(envelope["error"].contains("code"));
    } else {
      REQUIRE(outcome.status == 200);
      CHECK(outcome.complete);
      CHECK(outcome.framing_ok);
      REQUIRE(!outcome.events.empty());
      CHECK(outcome.events.back() == "[DONE]");
      // 48 tokens: a role chunk, then text chunks; never an error event.
      for (const std::string& event : outcome.events) CHECK_THAT(event, !Catch::Contains("\"error\""));
      ++completed;
    }
  }
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(rejected >= 1);
  CHECK(completed >= 1);  // at least the first; a second fits only once the first has left the waiting queue
  CHECK(rejected + completed == kClients);
  CHECK(ScrapeMetric(gateway.port(), "llmc_gateway_rejections_total", {{"reason", "queue_full"}}).value_or(0) ==
        rejected);

  // Once the burst is over the worker takes requests again, and no generation is left behind.
  ExpectChatOk(gateway.port());
  CHECK(WaitUntil([&] { return ScrapeMetric(gateway.port(), "llmc_gateway_requests_in_flight").value_or(-1) == 0; },
                  absl::Seconds(5)));
}

TEST_CASE("gateway e2e: two workers share requests, one dying and then the controller stopping lose none",
          "[integration][gateway]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  auto worker_a = std::make_unique<WorkerProcess>(LLMC_WORKER_BINARY, SmallModelPackage(),
                                                  SmallWorkerArgs(controller.address(), "worker-a"));
  auto worker_b = std::make_unique<WorkerProcess>(LLMC_WORKER_BINARY, SmallModelPackage(),
                                                  SmallWorkerArgs(controller.address(), "worker-b"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 2; }, absl::Seconds(10)));
  REQUIRE(gateway.WaitHealthy());

  for (int i = 0; i < 8; ++i) ExpectChatOk(gateway.port());
  const double served_a = WorkerMetric(*worker_a, "llmc:request_success_total");
  const double served_b = WorkerMetric(*worker_b, "llmc:request_success_total");
  INFO("worker-a served " << served_a << ", worker-b served " << served_b);
  CHECK(served_a > 0);
  CHECK(served_b > 0);
  CHECK(served_a + served_b == 8);

  // worker-b dies; the controller still lists it until it misses heartbeats, so some picks land on it and
  // the gateway must try worker-a instead (UNAVAILABLE before the first token).
  worker_b->process().Signal(SIGKILL);
  REQUIRE(worker_b->process().WaitForExit(absl::Seconds(10)).has_value());
  for (int i = 0; i < 6; ++i) ExpectChatOk(gateway.port());
  {
    SseClient client(gateway.port(), kChatPath, Chat(4, true).dump());
    REQUIRE(client.status() == 200);
    CheckCompleteStream(client, client.ReadAll());
  }
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(ScrapeMetric(gateway.port(), "llmc_gateway_worker_retries_total").value_or(0) >= 1);

  // The controller goes away: routing continues from the gateway's cached table.
  controller.process().Signal(SIGKILL);
  REQUIRE(controller.process().WaitForExit(absl::Seconds(10)).has_value());
  for (int i = 0; i < 4; ++i) ExpectChatOk(gateway.port());
  {
    SseClient client(gateway.port(), kChatPath, Chat(4, true).dump());
    REQUIRE(client.status() == 200);
    CheckCompleteStream(client, client.ReadAll());
  }
  const HttpReply models = HttpCall(gateway.port(), "GET", "/v1/models");
  REQUIRE(models.status == 200);
  CHECK(ParseJson(models.body)["data"][0]["id"] == kSmallModelName);
  CHECK(gateway.HealthStatus() == 200);
}

}  // namespace
}  // namespace llmc::testing
