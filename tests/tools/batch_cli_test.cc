// Integration test: llmc-batch runs OpenAI batch files and plain prompts files through an in-process engine:
// one output line per input line in order, answers equal to what the cluster's gateway answers for the same
// greedy requests, error lines for bad lines without stopping the rest.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/small_model.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

std::vector<json> ReadJsonLines(const std::string& path) {
  std::ifstream file(path);
  std::vector<json> lines;
  std::string line;
  while (std::getline(file, line)) lines.push_back(json::parse(line));
  return lines;
}

json BatchLine(const std::string& id, const std::string& url, const json& body) {
  return {{"custom_id", id}, {"method", "POST"}, {"url", url}, {"body", body}};
}

CommandResult RunBatch(const std::string& input, const std::string& output, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model_path=" + SmallModelPackage(), "--input=" + input, "--output=" + output,
                                   "--num_threads=1", "--kv_cache_bytes=" + std::to_string(64 << 20)};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunCommand(LLMC_BATCH_BINARY, args, absl::Seconds(240));
}

TEST_CASE("llmc-batch: an OpenAI batch file gives one line per input, in order, with error lines for bad ones",
          "[integration][tools][batch]") {
  const std::string dir = MakeTempDir("llmc-batch");
  const json chat = {{"model", kSmallModelName},
                     {"messages", {{{"role", "user"}, {"content", "Hello there"}}}},
                     {"max_tokens", 8},
                     {"temperature", 0}};
  const json completion = {{"model", kSmallModelName},
                           {"prompt", "Once upon a time"},
                           {"max_tokens", 6},
                           {"temperature", 0},
                           {"logprobs", 1}};
  std::vector<std::string> lines = {
      BatchLine("chat-1", "/v1/chat/completions", chat).dump(),
      "this is not json",
      BatchLine("two-prompts", "/v1/completions",
                {{"model", kSmallModelName},
                 {"prompt", {"Once upon a time", "Hello"}},
                 {"max_tokens", 6},
                 {"temperature", 0},
                 {"n", 2}})
          .dump(),
      BatchLine("embed", "/v1/embeddings", {{"model", kSmallModelName}, {"input", {"a", "b", "c"}}}).dump(),
      BatchLine("bad-temperature", "/v1/completions", {{"model", kSmallModelName}, {"prompt", "x"}, {"temperature", 9}})
          .dump(),
      BatchLine("other-model", "/v1/completions", {{"model", "nope"}, {"prompt", "x"}}).dump(),
      json{{"custom_id", "bad-url"}, {"method", "POST"}, {"url", "/v1/images"}, {"body", json::object()}}.dump(),
      BatchLine("too-long", "/v1/completions",
                {{"model", kSmallModelName}, {"prompt", std::vector<int>(5000, 7)}, {"max_tokens", 4}})
          .dump(),
      BatchLine("completion", "/v1/completions", completion).dump(),
  };
  // Many more greedy requests than the engine runs at once, to check the order holds under load.
  for (int i = 0; i < 40; ++i)
    lines.push_back(BatchLine("chat-again-" + std::to_string(i), "/v1/chat/completions", chat).dump());
  // A chat line's answer is read as the worker reads it: a hermes call (forced here by a regex, since the
  // random model cannot choose one) comes back as message.tool_calls.
  const json weather = {{"type", "function"},
                        {"function",
                         {{"name", "get_weather"},
                          {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
  json tool_chat = chat;
  tool_chat["tools"] = json::array({weather});
  tool_chat["max_tokens"] = 64;
  tool_chat["separate_reasoning"] = false;
  tool_chat["guided_regex"] =
      "<tool_call>\\n\\{\"name\": \"get_weather\", \"arguments\": \\{\"city\": \"Oslo\"\\}\\}\\n</tool_call>";
  lines.push_back(BatchLine("tool-call", "/v1/chat/completions", tool_chat).dump());
  {
    std::ofstream input(dir + "/in.jsonl");
    for (const std::string& line : lines) input << line << "\n";
    input << "\n";  // blank lines are skipped
  }
  const CommandResult run = RunBatch(dir + "/in.jsonl", dir + "/out.jsonl", {"--max_running=4"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains(std::to_string(lines.size()) + " requests (5 answered with an error)"));
  CHECK_THAT(run.output, Catch::Contains("generated tokens/s"));
  const std::vector<json> out = ReadJsonLines(dir + "/out.jsonl");
  REQUIRE(out.size() == lines.size());
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i]["id"] == "batch_req_" + std::to_string(i));

  const json& first = out[0];
  CHECK(first["custom_id"] == "chat-1");
  CHECK(first["error"].is_null());
  REQUIRE(first["response"]["status_code"] == 200);
  const json& body = first["response"]["body"];
  CHECK(body["object"] == "chat.completion");
  CHECK(body["model"] == kSmallModelName);
  CHECK(body["usage"]["completion_tokens"] == 8);
  const std::string chat_text = body["choices"][0]["message"]["content"];
  for (int i = 0; i < 40; ++i) {
    INFO("repeat " << i);
    const json& again = out[9 + i];
    CHECK(again["custom_id"] == "chat-again-" + std::to_string(i));
    CHECK(again["response"]["body"]["choices"][0]["message"]["content"] == chat_text);  // greedy, any batch
  }

  CHECK(out[1]["custom_id"].is_null());
  CHECK(out[1]["response"].is_null());
  CHECK(out[1]["error"]["code"] == "invalid_request");

  const json& two = out[2]["response"]["body"];
  REQUIRE(two["choices"].size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(two["choices"][i]["index"] == i);
  CHECK(two["choices"][0]["text"] == two["choices"][1]["text"]);  // greedy: the two samples of a prompt agree
  CHECK(two["usage"]["completion_tokens"] == 24);

  const json& embed = out[3]["response"]["body"];
  REQUIRE(embed["data"].size() == 3);
  CHECK(embed["data"][2]["index"] == 2);
  CHECK(embed["data"][0]["embedding"].size() == embed["data"][1]["embedding"].size());

  CHECK(out[4]["response"]["status_code"] == 400);
  CHECK(out[4]["response"]["body"]["error"]["param"] == "temperature");
  CHECK(out[5]["response"]["status_code"] == 404);
  CHECK(out[5]["response"]["body"]["error"]["code"] == "model_not_found");
  CHECK(out[6]["custom_id"] == "bad-url");
  CHECK(out[6]["response"].is_null());
  CHECK_THAT(out[6]["error"]["message"].get<std::string>(), Catch::Contains("url must be"));
  CHECK(out[7]["response"]["status_code"] == 400);
  CHECK_THAT(out[7]["response"]["body"]["error"]["message"].get<std::string>(), Catch::Contains("context length"));

  const json& logprobs = out[8]["response"]["body"]["choices"][0]["logprobs"];
  CHECK(logprobs["tokens"].size() == 6);
  CHECK(logprobs["top_logprobs"][0].size() == 1);

  const json& called = out.back()["response"]["body"]["choices"][0];
  INFO(called.dump());
  CHECK(called["finish_reason"] == "tool_calls");
  CHECK(called["message"]["content"].is_null());
  REQUIRE(called["message"]["tool_calls"].size() == 1);
  CHECK(called["message"]["tool_calls"][0]["function"]["name"] == "get_weather");
  CHECK(json::parse(called["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()) ==
        json{{"city", "Oslo"}});
}

TEST_CASE("llmc-batch: a plain prompts file becomes completions with the flags' settings",
          "[integration][tools][batch]") {
  const std::string dir = MakeTempDir("llmc-batch-prompts");
  {
    std::ofstream input(dir + "/prompts.txt");
    input << "The weather today is\n\nOnce upon a time\r\nHello\n";
  }
  const CommandResult run = RunBatch(dir + "/prompts.txt", dir + "/out.jsonl", {"--max_tokens=5", "--progress=false"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::vector<json> out = ReadJsonLines(dir + "/out.jsonl");
  REQUIRE(out.size() == 3);
  CHECK(out[0]["custom_id"] == "prompt-1");
  CHECK(out[1]["custom_id"] == "prompt-3");
  CHECK(out[2]["custom_id"] == "prompt-4");
  for (const json& line : out) {
    REQUIRE(line["response"]["status_code"] == 200);
    CHECK(line["response"]["body"]["object"] == "text_completion");
    CHECK(line["response"]["body"]["usage"]["completion_tokens"] == 5);
  }

  const CommandResult missing = RunBatch(dir + "/no-such-file", dir + "/out2.jsonl");
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.output, Catch::Contains("cannot read"));
  const CommandResult bad_flag = RunBatch(dir + "/prompts.txt", dir + "/out3.jsonl", {"--max_tokens=0"});
  CHECK(bad_flag.exit_code == 2);
}

}  // namespace
}  // namespace llmc::testing
