// Chat through the real controller, worker and gateway with SentencePiece tokenizers (Llama 2, Gemma 3)
// and Jinja chat templates: the model's own, one sent with the request, tools, and a template that raises.
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_http.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/small_model.h"
#include "tests/support/tokenizer_files.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

// A tiny random-weight package with a real vocabulary; the exporter takes the model's chat template
// from the tokenizer_config.json beside tokenizer.json unless `builtin_template` names one.
std::string TinyPackage(const std::string& tokenizer, int vocab_size, int eos_id, const std::string& builtin_template) {
  const std::string out = MakeTempDir("llmc-" + tokenizer) + "/" + tokenizer;
  std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py",
                                   "--random",
                                   "--preset",
                                   "tiny",
                                   "--vocab-size",
                                   std::to_string(vocab_size),
                                   "--eos-token-id",
                                   std::to_string(eos_id),
                                   "--name",
                                   tokenizer,
                                   "--tokenizer",
                                   TokenizerJsonPath(tokenizer),
                                   "--out",
                                   out};
  if (!builtin_template.empty()) {
    args.push_back("--chat-template");
    args.push_back(builtin_template);
  }
  const CommandResult result = RunCommand(LLMC_PYTHON, args, absl::Seconds(240));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return out;
}

struct Cluster {
  explicit Cluster(const std::string& package, const std::vector<std::string>& worker_flags = {})
      : controller(LLMC_CONTROLLER_BINARY, {}),
        worker(LLMC_WORKER_BINARY, package, SmallWorkerArgs(controller.address(), "template-worker", worker_flags)),
        gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"}) {}
  ControllerProcess controller;
  WorkerProcess worker;
  GatewayProcess gateway;
};

json UserChat(const std::string& model, const std::string& text) {
  return {{"model", model},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})},
          {"max_tokens", 6},
          {"ignore_eos", true},
          {"temperature", 0}};
}

// Posts `body` and returns the answer after checking its status.
json Post(Cluster& cluster, const json& body, int status) {
  const HttpReply reply = PostJson(cluster.gateway.port(), kChatPath, body.dump());
  INFO("status " << reply.status << " body: " << reply.body << "\nworker log:\n" << cluster.worker.process().ReadLog());
  REQUIRE(reply.status == status);
  return json::parse(reply.body);
}

size_t TokenCount(const std::string& tokenizer, const std::string& text) {
  return RealTokenizer(tokenizer).Encode(text).value().size();
}

TEST_CASE("chat templates e2e: a Gemma 3 tokenizer model renders chat with its own Jinja template",
          "[integration][gateway][jinja]") {
  Cluster cluster(TinyPackage("gemma3", 262144, 106, ""), {"--trust_request_chat_template=true"});
  REQUIRE(cluster.gateway.WaitHealthy());

  const json answer = Post(cluster, UserChat("gemma3", "Hi there 👋"), 200);
  CHECK(answer["usage"]["completion_tokens"] == 6);
  // What Gemma 3's template writes for one user turn; "<bos>" and the turn markers are special tokens.
  CHECK(answer["usage"]["prompt_tokens"] ==
        TokenCount("gemma3", "<bos><start_of_turn>user\nHi there 👋<end_of_turn>\n<start_of_turn>model\n"));

  // The template raises on turns that do not alternate: HTTP 400 with its message, never a retry.
  json repeated = UserChat("gemma3", "one");
  repeated["messages"].push_back({{"role", "user"}, {"content", "two"}});
  const json raised = Post(cluster, repeated, 400);
  CHECK_THAT(raised["error"]["message"].get<std::string>(), Catch::Contains("roles must alternate"));

  // A request's own template wins (vLLM's chat_template), with its kwargs.
  json own = UserChat("gemma3", "ignored");
  own["chat_template"] = "{{ bos_token }}{{ greeting }} {{ messages[0].content | upper }}";
  own["chat_template_kwargs"] = {{"greeting", "hello"}};
  CHECK(Post(cluster, own, 200)["usage"]["prompt_tokens"] == TokenCount("gemma3", "<bos>hello IGNORED"));
  own["chat_template"] = "{% include 'x' %}";
  CHECK_THAT(Post(cluster, own, 400)["error"]["message"].get<std::string>(), Catch::Contains("include"));

  // The worker still serves after the failures.
  CHECK(Post(cluster, UserChat("gemma3", "again"), 200)["usage"]["completion_tokens"] == 6);
}

TEST_CASE("chat templates e2e: a Llama 2 tokenizer model serves chat and completions (built-in template)",
          "[integration][gateway][jinja]") {
  Cluster cluster(TinyPackage("llama2", 32000, 2, "llama2"));
  REQUIRE(cluster.gateway.WaitHealthy());
  const json answer = Post(cluster, UserChat("llama2", "Bonjour, ça va ?"), 200);
  CHECK(answer["usage"]["completion_tokens"] == 6);
  CHECK(answer["usage"]["prompt_tokens"] == TokenCount("llama2", "<s>[INST] Bonjour, ça va ? [/INST]"));
  // Completions add the tokenizer's BOS.
  const HttpReply completion =
      PostJson(cluster.gateway.port(), "/v1/completions",
               json{{"model", "llama2"}, {"prompt", "Once upon"}, {"max_tokens", 3}, {"ignore_eos", true}}.dump());
  REQUIRE(completion.status == 200);
  CHECK(json::parse(completion.body)["usage"]["prompt_tokens"] == 1 + TokenCount("llama2", "Once upon"));
  // vLLM's add_special_tokens, per request: none for this completion, the BOS on top of the template's for
  // this chat.
  const HttpReply bare = PostJson(
      cluster.gateway.port(), "/v1/completions",
      json{{"model", "llama2"}, {"prompt", "Once upon"}, {"max_tokens", 3}, {"add_special_tokens", false}}.dump());
  REQUIRE(bare.status == 200);
  CHECK(json::parse(bare.body)["usage"]["prompt_tokens"] == TokenCount("llama2", "Once upon"));
  json with_bos = UserChat("llama2", "Bonjour, ça va ?");
  with_bos["add_special_tokens"] = true;
  CHECK(Post(cluster, with_bos, 200)["usage"]["prompt_tokens"] == answer["usage"]["prompt_tokens"].get<int>() + 1);
  // The built-in template cannot show tools: a clear 400.
  json with_tools = UserChat("llama2", "weather?");
  with_tools["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}}}}});
  CHECK_THAT(Post(cluster, with_tools, 400)["error"]["message"].get<std::string>(),
             Catch::Contains("built-in 'llama2' template"));
}

TEST_CASE("chat templates e2e: tools and tool results reach Qwen3's own template", "[integration][gateway][jinja]") {
  Cluster cluster(SmallModelPackage());
  REQUIRE(cluster.gateway.WaitHealthy());
  json body = UserChat(kSmallModelName, "What is the weather in Oslo?");
  body["tools"] =
      json::array({{{"type", "function"},
                    {"function",
                     {{"name", "get_weather"},
                      {"description", "Weather by city"},
                      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", ""},
       {"tool_calls",
        json::array({{{"id", "c1"},
                      {"type", "function"},
                      {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Oslo\"}"}}}}})}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}});
  const json with_tools = Post(cluster, body, 200);
  const json plain = Post(cluster, UserChat(kSmallModelName, "What is the weather in Oslo?"), 200);
  // The tool schemas, the call and its result are in the prompt.
  CHECK(with_tools["usage"]["prompt_tokens"].get<int>() > plain["usage"]["prompt_tokens"].get<int>() + 40);
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  CHECK(Post(cluster, body, 200)["usage"]["prompt_tokens"].get<int>() >
        with_tools["usage"]["prompt_tokens"].get<int>());
}

}  // namespace
}  // namespace llmc::testing
