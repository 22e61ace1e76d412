// Integration tests: malformed and impossible requests to the real llmc-gateway (in front of the real
// controller and a real worker) get 4xx answers in the OpenAI error envelope, and the gateway keeps serving.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/cluster_http.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/small_model.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

constexpr char kChat[] = "/v1/chat/completions";
constexpr char kCompletions[] = "/v1/completions";
constexpr int kMaxBodyBytes = 65536;

struct BadRequest {
  std::string name;
  std::string path;
  std::string body;
  int status;
  std::optional<std::string> param;  // the envelope's `param`; nullopt: not checked
  std::optional<std::string> code;   // the envelope's `code`; nullopt: not checked
};

json UserMessages(const std::string& content = "Hello") {
  return json::array({{{"role", "user"}, {"content", content}}});
}

// A valid chat request with `key` replaced by `value`.
std::string ChatWith(const std::string& key, const json& value) {
  json body = {{"model", kSmallModelName}, {"messages", UserMessages()}, {"max_tokens", 4}};
  body[key] = value;
  return body.dump();
}

std::string CompletionWith(const std::string& key, const json& value) {
  json body = {{"model", kSmallModelName}, {"prompt", "Hello"}, {"max_tokens", 4}};
  body[key] = value;
  return body.dump();
}

// `body` (a JSON object) with `key` set to `value`.
std::string Set(const std::string& body, const std::string& key, const json& value) {
  json parsed = json::parse(body);
  parsed[key] = value;
  return parsed.dump();
}

std::string LongText(int words) {
  std::string text;
  for (int i = 0; i < words; ++i) absl::StrAppend(&text, "word", i, " ");
  return text;
}

std::vector<BadRequest> BadRequests() {
  const std::string long_prompt = LongText(2 * kShortContext);  // several tokens a word: far past the context
  json chat_without_model = {{"messages", UserMessages()}};
  return {
      {"bad JSON", kChat, R"({"model": "llmc-small", "messages": [)", 400, std::nullopt, std::nullopt},
      {"trailing garbage", kChat, ChatWith("max_tokens", 4) + "}", 400, std::nullopt, std::nullopt},
      // JSON's parser would stop at the NUL and serve the request before it, the junk unread.
      {"a NUL byte after the body", kChat, ChatWith("max_tokens", 4) + std::string(1, '\0') + "junk", 400, std::nullopt,
       std::nullopt},
      {"empty body", kChat, "", 400, std::nullopt, std::nullopt},
      {"body is an array", kChat, "[1, 2, 3]", 400, std::nullopt, std::nullopt},
      {"body is a string", kCompletions, R"("prompt")", 400, std::nullopt, std::nullopt},
      {"model missing", kChat, chat_without_model.dump(), 400, "model", std::nullopt},
      {"model is a number", kChat, ChatWith("model", 7), 400, "model", std::nullopt},
      {"messages is a string", kChat, ChatWith("messages", "hi"), 400, "messages", std::nullopt},
      {"messages empty", kChat, ChatWith("messages", json::array()), 400, "messages", std::nullopt},
      {"message content is a number", kChat, ChatWith("messages", json::array({{{"role", "user"}, {"content", 42}}})),
       400, "messages[0].content", std::nullopt},
      {"temperature is a string", kChat, ChatWith("temperature", "hot"), 400, "temperature", std::nullopt},
      {"temperature is a string, streaming", kChat, Set(ChatWith("temperature", "hot"), "stream", true), 400,
       "temperature", std::nullopt},
      {"stream is a string", kChat, ChatWith("stream", "yes"), 400, "stream", std::nullopt},
      {"max_tokens is a string", kChat, ChatWith("max_tokens", "16"), 400, "max_tokens", std::nullopt},
      {"max_tokens negative", kChat, ChatWith("max_tokens", -1), 400, "max_tokens", std::nullopt},
      {"max_tokens zero", kCompletions, CompletionWith("max_tokens", 0), 400, "max_tokens", std::nullopt},
      {"max_tokens huge", kChat, ChatWith("max_tokens", 1000000000000LL), 400, "max_tokens", std::nullopt},
      {"max_tokens huge, streaming", kChat, Set(ChatWith("max_tokens", 1000000000000LL), "stream", true), 400,
       "max_tokens", std::nullopt},
      {"max_tokens past the context", kChat, ChatWith("max_tokens", 100000), 400, std::nullopt, std::nullopt},
      {"n fractional", kChat, ChatWith("n", 1.5), 400, "n", std::nullopt},
      {"stop is a number", kChat, ChatWith("stop", 5), 400, "stop", std::nullopt},
      {"prompt is an object", kCompletions, CompletionWith("prompt", json::object()), 400, "prompt", std::nullopt},
      {"invalid UTF-8 in a string", kChat,
       std::string(R"({"model": "llmc-small", "messages": [{"role": "user", "content": "caf)") + "\xc3\x28\xff" +
           R"("}]})",
       400, std::nullopt, std::nullopt},
      {"invalid UTF-8 in a key", kCompletions,
       std::string(R"({"model": "llmc-small", "prompt": "x", ")") + "\xfe\xfe" + R"(": 1})", 400, std::nullopt,
       std::nullopt},
      {"unknown model", kChat, ChatWith("model", "no-such-model"), 404, std::nullopt, "model_not_found"},
      {"unknown model, completions streaming", kCompletions,
       Set(CompletionWith("model", "no-such-model"), "stream", true), 404, std::nullopt, "model_not_found"},
      {"prompt longer than the context", kCompletions, CompletionWith("prompt", long_prompt), 400, std::nullopt,
       std::nullopt},
      {"chat longer than the context", kChat, ChatWith("messages", UserMessages(long_prompt)), 400, std::nullopt,
       std::nullopt},
      {"chat longer than the context, streaming", kChat,
       Set(ChatWith("messages", UserMessages(long_prompt)), "stream", true), 400, std::nullopt, std::nullopt},
  };
}

void CheckEnvelope(const HttpReply& reply, int status, const std::optional<std::string>& param,
                   const std::optional<std::string>& code) {
  INFO("status " << reply.status << " error '" << reply.error << "' body: " << reply.body);
  REQUIRE(reply.status == status);
  CHECK_THAT(reply.Header("Content-Type"), Catch::StartsWith("application/json"));
  const json envelope = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  REQUIRE(!envelope.is_discarded());
  REQUIRE(envelope.contains("error"));
  const json& error = envelope["error"];
  CHECK(error["message"].is_string());
  CHECK(!error["message"].get<std::string>().empty());
  CHECK(error["type"].is_string());
  CHECK(error.contains("param"));
  CHECK(error.contains("code"));
  if (status >= 400 && status < 500 && status != 404 && status != 413) CHECK(error["type"] == "invalid_request_error");
  if (param.has_value()) CHECK(error["param"] == *param);
  if (code.has_value()) CHECK(error["code"] == *code);
}

TEST_CASE("gateway errors: malformed requests get 4xx envelopes and the gateway keeps serving",
          "[integration][gateway]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(
      LLMC_WORKER_BINARY, SmallModelPackage(),
      SmallWorkerArgs(controller.address(), "errors-worker", {"--max_model_len=" + std::to_string(kShortContext)}));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=200ms", "--max_body_bytes=" + std::to_string(kMaxBodyBytes)});
  REQUIRE(gateway.WaitHealthy());

  for (const BadRequest& bad : BadRequests()) {
    INFO("case: " << bad.name << " → POST " << bad.path << " " << bad.body.substr(0, 200));
    CheckEnvelope(PostJson(gateway.port(), bad.path, bad.body), bad.status, bad.param, bad.code);
  }

  {
    INFO("a body over --max_body_bytes gets 413");
    const std::string body = ChatWith("messages", UserMessages(std::string(kMaxBodyBytes + 1024, 'x')));
    CheckEnvelope(PostJson(gateway.port(), kChat, body), 413, std::nullopt, std::nullopt);
  }
  {
    INFO("unknown routes and methods");
    const HttpReply missing = HttpCall(gateway.port(), "GET", "/v1/nothing-here");
    CHECK(missing.status == 404);
    CHECK(json::parse(missing.body, nullptr, false).contains("error"));
    const HttpReply wrong_method = HttpCall(gateway.port(), "GET", kChat);
    CHECK(wrong_method.status == 405);
    CHECK(json::parse(wrong_method.body, nullptr, false).contains("error"));
  }

  // Nothing above broke the gateway or the worker.
  const HttpReply chat = PostJson(
      gateway.port(), kChat, json{{"model", kSmallModelName}, {"messages", UserMessages()}, {"max_tokens", 4}}.dump());
  INFO(chat.error << " " << chat.body << "\ngateway log:\n" << gateway.process().ReadLog());
  REQUIRE(chat.status == 200);
  CHECK(json::parse(chat.body)["choices"][0]["message"]["role"] == "assistant");
  SseClient stream(gateway.port(), kCompletions,
                   json{{"model", kSmallModelName}, {"prompt", "Hello"}, {"max_tokens", 4}, {"stream", true}}.dump());
  REQUIRE(stream.status() == 200);
  const std::vector<std::string> events = stream.ReadAll();
  REQUIRE(!events.empty());
  CHECK(events.back() == "[DONE]");
  CHECK(gateway.process().running());
  CHECK(worker.process().running());
}

TEST_CASE("gateway errors: a 5 MB prompt is 400 and a body over the default limit 413, never a retryable 429",
          "[integration][gateway]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(
      LLMC_WORKER_BINARY, SmallModelPackage(),
      SmallWorkerArgs(controller.address(), "big-body-worker", {"--max_model_len=" + std::to_string(kShortContext)}));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());

  std::string words;
  while (words.size() < 5'000'000) words += "hello world ";  // above gRPC's 4 MiB default, below 8 MiB
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {kCompletions, CompletionWith("prompt", words)}, {kChat, ChatWith("messages", UserMessages(words))}}) {
    INFO(path << ": the worker receives it and refuses it as longer than the context");
    const HttpReply reply = PostJson(gateway.port(), path, body);
    CheckEnvelope(reply, 400, std::nullopt, std::nullopt);
    CHECK(reply.Header("Retry-After").empty());
  }
  {
    INFO("a body over the default --max_body_bytes (8 MiB) gets 413, no Retry-After");
    std::string huge;
    while (huge.size() < (9u << 20)) huge += "hello world ";
    const HttpReply reply = PostJson(gateway.port(), kCompletions, CompletionWith("prompt", huge));
    CheckEnvelope(reply, 413, std::nullopt, std::nullopt);
    CHECK(reply.Header("Retry-After").empty());
  }
  const HttpReply after = PostJson(gateway.port(), kCompletions,
                                   json{{"model", kSmallModelName}, {"prompt", "Hello"}, {"max_tokens", 4}}.dump());
  INFO(after.body);
  CHECK(after.status == 200);
  CHECK(worker.process().running());
}

}  // namespace
}  // namespace llmc::testing
