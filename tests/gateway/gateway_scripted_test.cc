// Integration tests: the real llmc-gateway and llmc-controller with a scripted in-process worker (a
// llmc.v1.Worker gRPC server that streams fixed texts), registered at the controller through FakeWorker.
// They pin what the gateway does with the text it is given: SSE framing, JSON escaping, health, metrics.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/cluster_http.h"
#include "tests/support/controller_process.h"
#include "tests/support/fake_worker.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/scripted_worker.h"
#include "tests/support/wait.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

// Deltas that break naive SSE writers and JSON encoders.
std::vector<std::string> HostileTexts() {
  return {
      "Line one\nline two",
      "\r\n",
      "\n\n",
      "She said \"hi\" and left.",
      "back\\slash, \\n is not a newline, \\\" nor a quote",
      "\t tab and \x7f delete",
      std::string("nul\0byte", 8),
      "中文字符，日本語のテキスト、한국어",
      "👩🏽‍💻 and 👨‍👩‍👧‍👦 and 🏳️‍🌈",
      "data: not an event\n\ndata: [DONE]\n\n",
      "event: x\nid: 7\nretry: 1\n: comment",
      "",
      "\u2028\u2029 </script> end",
  };
}

std::string Joined(const std::vector<std::string>& texts) { return absl::StrJoin(texts, ""); }

// Every block of the raw body is exactly one `data: ` line and nothing else: a newline that leaked out
// of the JSON would make a second line.
void CheckStrictFraming(const SseClient& client) {
  INFO("raw body: " << client.raw());
  CHECK(client.framing_errors().empty());
  CHECK(client.comments() == 0);  // the script arrives at once: no keep-alive comment is due
  REQUIRE(client.raw().size() >= 2);
  CHECK(client.raw().substr(client.raw().size() - 2) == "\n\n");
  const std::string body = client.raw().substr(0, client.raw().size() - 2);
  for (absl::string_view block : absl::StrSplit(body, "\n\n")) {
    CHECK(absl::StartsWith(block, "data: "));
    CHECK(block.find('\n') == absl::string_view::npos);
    CHECK(block.find('\r') == absl::string_view::npos);
  }
}

struct Streamed {
  std::map<int, std::string> text;  // per choice index
  std::map<int, std::string> finish_reason;
  std::vector<json> chunks;
  bool saw_role = false;
};

Streamed ReadStream(SseClient& client, bool chat) {
  Streamed out;
  const std::vector<std::string> events = client.ReadAll(absl::Seconds(30));
  INFO("error: " << client.error() << " raw: " << client.raw());
  CHECK(client.complete());
  REQUIRE(!events.empty());
  CHECK(events.back() == "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = ParseJson(events[i]);
    out.chunks.push_back(chunk);
    for (const json& choice : chunk["choices"]) {
      const int index = choice["index"].get<int>();
      if (chat) {
        const json& delta = choice["delta"];
        if (delta.contains("role")) {
          CHECK(delta["role"] == "assistant");
          out.saw_role = true;
        }
        if (delta.contains("content") && delta["content"].is_string()) out.text[index] += delta["content"];
      } else {
        out.text[index] += choice["text"].get<std::string>();
      }
      if (choice["finish_reason"].is_string()) out.finish_reason[index] = choice["finish_reason"];
    }
  }
  CheckStrictFraming(client);
  return out;
}

struct ScriptedCluster {
  explicit ScriptedCluster(std::vector<std::string> texts) : ScriptedCluster(WorkerScript{std::move(texts)}) {}
  explicit ScriptedCluster(WorkerScript script)
      : controller(LLMC_CONTROLLER_BINARY, {}),
        worker(std::move(script)),
        gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"}),
        registration(controller.address(), MakeRegistration("scripted-worker", worker.address(), kScriptedModel),
                     absl::Milliseconds(200)) {}

  ControllerProcess controller;
  ScriptedWorker worker;
  GatewayProcess gateway;
  FakeWorker registration;
};

json ScriptedChat(bool stream) {
  return {{"model", kScriptedModel},
          {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
          {"stream", stream}};
}

TEST_CASE("gateway scripted: SSE framing carries hostile delta texts exactly", "[integration][gateway]") {
  const std::vector<std::string> texts = HostileTexts();
  ScriptedCluster cluster(texts);
  cluster.registration.Start();
  REQUIRE(cluster.gateway.WaitHealthy());
  const int port = cluster.gateway.port();

  SECTION("chat, streaming") {
    SseClient client(port, "/v1/chat/completions", ScriptedChat(true).dump());
    REQUIRE(client.status() == 200);
    CHECK_THAT(client.Header("Content-Type"), Catch::StartsWith("text/event-stream"));
    const Streamed streamed = ReadStream(client, /*chat=*/true);
    CHECK(streamed.saw_role);
    CHECK(streamed.text.size() == 1);
    CHECK(streamed.text.at(0) == Joined(texts));
    CHECK(streamed.finish_reason.at(0) == "stop");
    CHECK(streamed.chunks.back()["choices"][0]["finish_reason"] == "stop");
  }
  SECTION("chat, streaming, two choices interleaved, with usage") {
    json body = ScriptedChat(true);
    body["n"] = 2;
    body["stream_options"] = {{"include_usage", true}};
    SseClient client(port, "/v1/chat/completions", body.dump());
    REQUIRE(client.status() == 200);
    const Streamed streamed = ReadStream(client, /*chat=*/true);
    REQUIRE(streamed.text.size() == 2);
    CHECK(streamed.text.at(0) == Joined(texts));
    CHECK(streamed.text.at(1) == Joined(texts));
    CHECK(streamed.finish_reason.size() == 2);
    const json& usage = streamed.chunks.back()["usage"];
    CHECK(streamed.chunks.back()["choices"].empty());
    CHECK(usage["prompt_tokens"] == 5);
    CHECK(usage["completion_tokens"] == 2 * texts.size());
    CHECK(usage["total_tokens"] == 5 + 2 * texts.size());
  }
  SECTION("completions, streaming") {
    const json body = {{"model", kScriptedModel}, {"prompt", "hi"}, {"stream", true}};
    SseClient client(port, "/v1/completions", body.dump());
    REQUIRE(client.status() == 200);
    const Streamed streamed = ReadStream(client, /*chat=*/false);
    CHECK(streamed.text.at(0) == Joined(texts));
    CHECK(streamed.finish_reason.at(0) == "stop");
  }
  SECTION("chat and completions, not streaming") {
    const HttpReply chat = PostJson(port, "/v1/chat/completions", ScriptedChat(false).dump());
    INFO(chat.error << chat.body);
    REQUIRE(chat.status == 200);
    CHECK_THAT(chat.Header("Content-Type"), Catch::StartsWith("application/json"));
    CHECK(ParseJson(chat.body)["choices"][0]["message"]["content"] == Joined(texts));
    const HttpReply completion =
        PostJson(port, "/v1/completions", json{{"model", kScriptedModel}, {"prompt", "hi"}}.dump());
    REQUIRE(completion.status == 200);
    CHECK(ParseJson(completion.body)["choices"][0]["text"] == Joined(texts));
  }
  SECTION("responses, streaming: named events carry the text exactly") {
    const json body = {{"model", kScriptedModel},
                       {"instructions", "Be brief."},
                       {"input", "hi"},
                       {"stream", true},
                       {"metadata", {{"trace", "t1"}}}};
    SseClient client(port, "/v1/responses", body.dump());
    REQUIRE(client.status() == 200);
    CHECK_THAT(client.Header("Content-Type"), Catch::StartsWith("text/event-stream"));
    const std::vector<std::string> events = client.ReadAll(absl::Seconds(30));
    INFO("error: " << client.error() << " raw: " << client.raw());
    CHECK(client.complete());
    CHECK(client.framing_errors().empty());
    REQUIRE(events.size() >= 3);
    REQUIRE(client.event_names().size() == events.size());
    std::string text;
    for (size_t i = 0; i < events.size(); ++i) {
      const json event = ParseJson(events[i]);
      CHECK(event["type"] == client.event_names()[i]);
      CHECK(event["sequence_number"] == i);
      if (event["type"] == "response.output_text.delta") text += event["delta"].get<std::string>();
    }
    CHECK(text == Joined(texts));
    CHECK(client.event_names().front() == "response.created");
    CHECK(client.event_names().back() == "response.completed");
    const json response = ParseJson(events.back())["response"];
    CHECK(response["status"] == "completed");
    CHECK(response["output"][0]["content"][0]["text"] == Joined(texts));
    CHECK(response["usage"]["input_tokens"] == 5);
    CHECK(response["usage"]["output_tokens"] == texts.size());
    CHECK(response["metadata"] == json{{"trace", "t1"}});
    // The worker got the instructions as the first chat message.
    const std::vector<v1::GenerateRequest> requests = cluster.worker.requests();
    REQUIRE(!requests.empty());
    const json messages = ParseJson(requests.back().chat().messages_json());
    CHECK(messages ==
          json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}}));
  }
  SECTION("responses, not streaming, and a refusal") {
    const HttpReply reply = PostJson(port, "/v1/responses", json{{"model", kScriptedModel}, {"input", "hi"}}.dump());
    INFO(reply.error << reply.body);
    REQUIRE(reply.status == 200);
    CHECK_THAT(reply.Header("Content-Type"), Catch::StartsWith("application/json"));
    const json response = ParseJson(reply.body);
    CHECK(response["object"] == "response");
    CHECK(absl::StartsWith(response["id"].get<std::string>(), "resp_"));
    CHECK(response["status"] == "completed");
    CHECK(response["output"][0]["content"][0]["text"] == Joined(texts));
    const HttpReply refused =
        PostJson(port, "/v1/responses", json{{"model", kScriptedModel}, {"input", "hi"}, {"store", true}}.dump());
    CHECK(refused.status == 400);
    CHECK(ParseJson(refused.body)["error"]["param"] == "store");
  }
  // The request the worker got names the model and carries the chat messages, not a rendered prompt.
  const std::vector<v1::GenerateRequest> requests = cluster.worker.requests();
  REQUIRE(!requests.empty());
  CHECK(requests.front().model() == kScriptedModel);
  CHECK(!requests.front().request_id().empty());
}

TEST_CASE("gateway scripted: /health turns 200 once a worker registers and /metrics counts requests",
          "[integration][gateway]") {
  ScriptedCluster cluster({"Hello", ",", " world"});
  const int port = cluster.gateway.port();

  const HttpReply unhealthy = HttpCall(port, "GET", "/health");
  CHECK(unhealthy.status == 503);
  CHECK(ParseJson(unhealthy.body)["error"]["type"].is_string());

  cluster.registration.Start();
  REQUIRE(cluster.gateway.WaitHealthy(absl::Seconds(10)));

  const HttpReply answer = PostJson(port, "/v1/chat/completions", ScriptedChat(false).dump());
  INFO(answer.error << answer.body);
  REQUIRE(answer.status == 200);
  const json parsed = ParseJson(answer.body);
  CHECK(parsed["choices"][0]["message"]["content"] == "Hello, world");
  CHECK(parsed["usage"]["completion_tokens"] == 3);
  CHECK(PostJson(port, "/v1/chat/completions", "{not json").status == 400);
  CHECK(PostJson(port, "/v1/chat/completions", ScriptedChat(false).dump()).status == 200);
  const HttpReply models = HttpCall(port, "GET", "/v1/models");
  REQUIRE(models.status == 200);
  CHECK(ParseJson(models.body)["data"][0]["id"] == kScriptedModel);

  // A request is counted once its answer is fully written, which may be a moment after the client has
  // read it: scrape until they all show up.
  HttpReply metrics;
  const auto count = [&](const std::string& method, const std::string& route, const std::string& status) {
    return MetricSum(metrics.body, "llmc_gateway_requests_total",
                     {{"method", method}, {"route", route}, {"status", status}})
        .value_or(0);
  };
  WaitUntil(
      [&] {
        metrics = HttpCall(port, "GET", "/metrics");
        return count("GET", "/v1/models", "200") >= 1 && count("POST", "/v1/chat/completions", "200") >= 2 &&
               count("POST", "/v1/chat/completions", "400") >= 1;
      },
      absl::Seconds(5));
  REQUIRE(metrics.status == 200);
  CHECK_THAT(metrics.Header("Content-Type"), Catch::StartsWith("text/plain"));
  INFO(metrics.body);
  CHECK(count("POST", "/v1/chat/completions", "200") == 2);
  CHECK(count("POST", "/v1/chat/completions", "400") == 1);
  CHECK(count("GET", "/v1/models", "200") == 1);
  CHECK(count("GET", "/health", "503") >= 1);
  CHECK(count("GET", "/health", "200") >= 1);
  // Finished generations are released (the gauge falls when the last reference to one goes).
  CHECK(WaitUntil([&] { return ScrapeMetric(port, "llmc_gateway_requests_in_flight").value_or(-1) == 0; },
                  absl::Seconds(5)));
  CHECK(MetricSum(metrics.body, "llmc_gateway_time_to_first_token_seconds_count").value_or(0) == 2);
  CHECK(cluster.worker.generate_calls() == 2);
}

// Text that must stay in the gateway's log: a worker's address and libtorch's exception text. libtorch's source
// paths and function names are looked for as "c10/" and "c10_": a bare "c10" also turns up in the random hex of a
// completion's id (once in a few hundred answers).
void CheckNoInternalDetail(const std::string& body) {
  INFO(body);
  for (const char* leak :
       {"10.0.0.5", "21002", "CUDA", "c10/", "c10_", "threw", "illegal memory", "ipv4", "127.0.0.1"}) {
    CHECK(body.find(leak) == std::string::npos);
  }
}

TEST_CASE("gateway scripted: a failed model step's exception text and worker addresses stay out of the answer",
          "[integration][gateway]") {
  const std::string detail =
      "the model step threw: CUDA error: an illegal memory access was encountered (worker 10.0.0.5:21002)\n"
      "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44";
  SECTION("not streamed: the worker fails before its first token") {
    ScriptedCluster cluster(WorkerScript{{}, v1::FINISH_REASON_STOP, 5, grpc::StatusCode::INTERNAL, detail});
    cluster.registration.Start();
    REQUIRE(cluster.gateway.WaitHealthy());
    const HttpReply reply = PostJson(cluster.gateway.port(), "/v1/chat/completions", ScriptedChat(false).dump());
    CHECK(reply.status == 500);
    CheckNoInternalDetail(reply.body);
    CHECK(ParseJson(reply.body)["error"]["type"] == "server_error");
    CHECK(cluster.worker.generate_calls() >= 1);
  }
  SECTION("streamed: the worker fails after a token") {
    ScriptedCluster cluster(WorkerScript{{"Hello"}, v1::FINISH_REASON_STOP, 5, grpc::StatusCode::INTERNAL, detail});
    cluster.registration.Start();
    REQUIRE(cluster.gateway.WaitHealthy());
    SseClient client(cluster.gateway.port(), "/v1/chat/completions", ScriptedChat(true).dump());
    REQUIRE(client.status() == 200);
    const std::vector<std::string> events = client.ReadAll(absl::Seconds(30));
    INFO("raw: " << client.raw());
    REQUIRE(events.size() >= 2);
    CHECK(events.back() == "[DONE]");
    CHECK(ParseJson(events[events.size() - 2])["error"]["type"] == "server_error");
    CheckNoInternalDetail(client.raw());
  }
  SECTION("a worker that cannot be reached: gRPC's error names its address") {
    ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
    GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
    // A port nothing listens on: connections to it are refused.
    std::string dead_address;
    {
      ScriptedWorker gone(WorkerScript{{"x"}});
      dead_address = gone.address();
    }
    FakeWorker registration(controller.address(), MakeRegistration("gone-worker", dead_address, kScriptedModel),
                            absl::Milliseconds(200));
    registration.Start();
    REQUIRE(gateway.WaitHealthy());
    const HttpReply reply = PostJson(gateway.port(), "/v1/chat/completions", ScriptedChat(false).dump());
    CHECK(reply.status == 503);
    CheckNoInternalDetail(reply.body);
  }
}

}  // namespace
}  // namespace llmc::testing
