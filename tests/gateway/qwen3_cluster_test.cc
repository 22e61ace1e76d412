// A Qwen3 network (QK-norm), exported from a random-weight checkpoint in Hugging Face's layout with the real
// Qwen3 tokenizer and its tokenizer_config.json beside it, served through the real controller, worker and
// gateway: chat with Qwen3's own Jinja template, tools rendered into the prompt, and a forced tool call parsed
// from the model's hermes output. The weights are random, so the checks are properties that hold for any weights.
#include <filesystem>
#include <fstream>
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

using nlohmann::ordered_json;

constexpr char kQwen3Model[] = "tiny-qwen3";

// tests/python/make_qwen3_fixture.py: the checkpoint with Qwen3's vocabulary (151,936 rows, tied), exported.
std::string Qwen3Package() {
  const std::string out = MakeTempDir("llmc-qwen3-cluster");
  const std::string tokenizer_dir = std::filesystem::path(TokenizerJsonPath("qwen3")).parent_path().string();
  const CommandResult result =
      RunCommand(LLMC_PYTHON,
                 {std::string(LLMC_SOURCE_DIR) + "/tests/python/make_qwen3_fixture.py", "--out", out, "--dtype",
                  "bfloat16", "--tied", "--vocab-size", "151936", "--bos-token-id", "151643", "--eos-token-id",
                  "151645", "--tokenizer-dir", tokenizer_dir, "--name", kQwen3Model, "--no-reference"},
                 absl::Seconds(240));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return out + "/package";
}

ordered_json PostChatOk(int port, const ordered_json& body) {
  const HttpReply reply = PostJson(port, kChatPath, body.dump());
  INFO(body.dump().substr(0, 600) << " -> " << reply.status << " " << reply.error << " " << reply.body.substr(0, 1200));
  REQUIRE(reply.status == 200);
  return ordered_json::parse(reply.body);
}

TEST_CASE("qwen3 e2e: a Qwen3 network with the Qwen3 tokenizer renders chat and tools and answers a forced call",
          "[integration][gateway][jinja]") {
  const std::string package = Qwen3Package();
  std::ifstream manifest_file(package + "/llmc-model.json");
  const ordered_json manifest = ordered_json::parse(manifest_file);
  CHECK(manifest["architecture"] == "qwen3");
  CHECK(manifest["tool_call_format"] == "hermes");
  CHECK(manifest["reasoning"]["start"] == "<think>");
  CHECK(manifest["chat_template_file"] == "chat_template.jinja");

  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, package, SmallWorkerArgs(controller.address(), "qwen3-worker"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());
  const int port = gateway.port();

  const ordered_json question = ordered_json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
  const ordered_json plain = PostChatOk(
      port,
      {{"model", kQwen3Model}, {"messages", question}, {"max_tokens", 8}, {"ignore_eos", true}, {"temperature", 0}});
  CHECK(plain["model"] == kQwen3Model);
  CHECK(plain["usage"]["completion_tokens"] == 8);
  CHECK(plain["choices"][0]["finish_reason"] == "length");

  // A strict tool whose one argument can only be "Paris"; tool_choice required forces a call.
  const ordered_json tool = {{"type", "function"},
                             {"function",
                              {{"name", "get_weather"},
                               {"description", "The weather in a city"},
                               {"strict", true},
                               {"parameters",
                                {{"type", "object"},
                                 {"properties", {{"city", {{"type", "string"}, {"enum", {"Paris"}}}}}},
                                 {"required", {"city"}},
                                 {"additionalProperties", false}}}}}};
  const ordered_json forced = PostChatOk(port, {{"model", kQwen3Model},
                                                {"messages", question},
                                                {"tools", ordered_json::array({tool})},
                                                {"tool_choice", "required"},
                                                {"parallel_tool_calls", false},
                                                {"separate_reasoning", false},
                                                {"max_tokens", 80},
                                                {"temperature", 0}});
  INFO(forced.dump());
  // The template printed the tool's schema into the prompt.
  CHECK(forced["usage"]["prompt_tokens"].get<int>() > plain["usage"]["prompt_tokens"].get<int>() + 40);
  const ordered_json& choice = forced["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  REQUIRE(choice["message"]["tool_calls"].size() == 1);
  const ordered_json& call = choice["message"]["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK(call["function"]["name"] == "get_weather");
  CHECK(ordered_json::parse(call["function"]["arguments"].get<std::string>()) == ordered_json{{"city", "Paris"}});
}

}  // namespace
}  // namespace llmc::testing
