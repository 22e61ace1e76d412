// Integration tests: tool calling, reasoning output and the Responses API through the real llmc-gateway,
// llmc-controller and llmc-worker (the small random-weight model with the real Qwen3 tokenizer and chat
// template, whose manifest says tool_call_format "hermes" and reasoning markers <think>/</think>), all on free
// loopback ports. The model cannot follow instructions, so every check is a property that holds for any
// weights: text forced by a regex (or by token restrictions) is parsed into tool calls, reasoning and content
// as the model's format says; forced tool choices finish as calls whose arguments validate; refusals are 400s
// in the OpenAI envelope.
//
// Clients: tests/gateway/openai_sdk_tools.mjs (the OpenAI Node SDK with zod: tools, streaming, runTools, the
// Responses API) and HTTP requests from here (the parsers, the template round trip, errors).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_http.h"
#include "tests/support/http_client.h"
#include "tests/support/small_cluster.h"
#include "tests/support/small_model.h"

namespace llmc::testing {
namespace {

// Ordered: the client's key order is what chat templates show the model (tojson), as clients send it.
using nlohmann::ordered_json;

// The cluster every test here starts.
class ToolCallingCluster : public SmallCluster {
 public:
  explicit ToolCallingCluster(std::vector<std::string> gateway_flags = {})
      : SmallCluster("tools-worker", {}, std::move(gateway_flags)) {}
};

ordered_json WeatherChat(int max_tokens, const std::string& content = "What is the weather in Paris?") {
  return {{"model", kSmallModelName},
          {"messages", ordered_json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

ordered_json With(ordered_json body, const ordered_json& fields) {
  body.update(fields);
  return body;
}

// A function tool whose arguments are {"city": string}; `strict` with "Paris" its only value.
ordered_json WeatherTool(bool strict = false) {
  ordered_json city = strict ? ordered_json{{"type", "string"}, {"enum", {"Paris"}}} : ordered_json{{"type", "string"}};
  ordered_json function = {{"name", "get_weather"},
                           {"description", "The weather in a city"},
                           {"parameters",
                            {{"type", "object"},
                             {"properties", {{"city", city}}},
                             {"required", {"city"}},
                             {"additionalProperties", false}}}};
  if (strict) function["strict"] = true;
  return {{"type", "function"}, {"function", function}};
}

ordered_json ParseOrderedJson(const std::string& text) {
  ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  INFO("not JSON: " << text);
  REQUIRE(!parsed.is_discarded());
  return parsed;
}

ordered_json PostOrderedOk(int port, const std::string& path, const ordered_json& body) {
  const HttpReply reply = PostJson(port, path, body.dump());
  INFO(path << " " << body.dump().substr(0, 600) << " -> " << reply.status << " " << reply.error << " "
            << reply.body.substr(0, 1200));
  REQUIRE(reply.status == 200);
  return ParseOrderedJson(reply.body);
}

std::vector<int> TokenizeText(int port, const std::string& text) {
  const ordered_json answer =
      PostOrderedOk(port, "/tokenize", {{"model", kSmallModelName}, {"prompt", text}, {"add_special_tokens", false}});
  return answer["tokens"].get<std::vector<int>>();
}

std::string DetokenizeIds(int port, const std::vector<int>& ids) {
  return PostOrderedOk(port, "/detokenize", {{"model", kSmallModelName}, {"tokens", ids}})["prompt"].get<std::string>();
}

// The one token that spells `text`.
int SingleToken(int port, const std::string& text) {
  const std::vector<int> ids = TokenizeText(port, text);
  INFO("'" << text << "' tokenizes to " << ordered_json(ids).dump());
  REQUIRE(ids.size() == 1);
  return ids[0];
}

// The ids of a chat choice's generated tokens (logprobs with return_tokens_as_token_ids).
std::vector<int> ChatTokenIds(const ordered_json& choice) {
  INFO(choice.dump());
  REQUIRE(choice["logprobs"].is_object());
  std::vector<int> ids;
  for (const ordered_json& entry : choice["logprobs"]["content"]) {
    const std::string token = entry["token"].get<std::string>();
    REQUIRE(token.rfind("token_id:", 0) == 0);
    ids.push_back(std::stoi(token.substr(9)));
  }
  return ids;
}

// A streamed chat answer reassembled per choice, as OpenAI streams tool calls: the first delta of an index
// carries id, type "function" and function.name, later ones only function.arguments fragments.
struct StreamedChoice {
  std::string content;
  std::string reasoning;
  ordered_json tool_calls = ordered_json::array();
  std::string finish_reason;
};

std::map<int, StreamedChoice> StreamedChoices(int port, ordered_json body) {
  body["stream"] = true;
  SseClient client(port, kChatPath, body.dump());
  INFO(body.dump().substr(0, 600) << " -> " << client.status() << " " << client.error());
  REQUIRE(client.status() == 200);
  const std::vector<std::string> events = client.ReadAll();
  REQUIRE(client.complete());
  REQUIRE(client.framing_errors().empty());
  REQUIRE(!events.empty());
  CHECK(events.back() == "[DONE]");
  std::map<int, StreamedChoice> choices;
  for (const std::string& data : events) {
    if (data == "[DONE]") continue;
    const ordered_json chunk = ParseOrderedJson(data);
    INFO(data);
    REQUIRE(chunk.contains("choices"));
    for (const ordered_json& part : chunk["choices"]) {
      StreamedChoice& choice = choices[part["index"].get<int>()];
      CHECK(choice.finish_reason.empty());  // nothing after the finish reason
      const ordered_json& delta = part["delta"];
      if (delta.contains("content") && delta["content"].is_string()) choice.content += delta["content"];
      if (delta.contains("reasoning_content")) choice.reasoning += delta["reasoning_content"].get<std::string>();
      for (const ordered_json& entry : delta.value("tool_calls", ordered_json::array())) {
        const size_t index = entry["index"].get<size_t>();
        if (index == choice.tool_calls.size()) {
          CHECK(entry["id"].is_string());
          CHECK(entry["type"] == "function");
          CHECK(entry["function"]["name"].is_string());
          choice.tool_calls.push_back(
              {{"id", entry["id"]},
               {"type", "function"},
               {"function",
                {{"name", entry["function"]["name"]}, {"arguments", entry["function"].value("arguments", "")}}}});
        } else {
          REQUIRE(index < choice.tool_calls.size());
          CHECK(!entry.contains("id"));
          CHECK(!entry["function"].contains("name"));
          choice.tool_calls[index]["function"]["arguments"] =
              choice.tool_calls[index]["function"]["arguments"].get<std::string>() +
              entry["function"]["arguments"].get<std::string>();
        }
      }
      if (part["finish_reason"].is_string()) choice.finish_reason = part["finish_reason"];
    }
  }
  return choices;
}

// A streamed choice equals the non-streamed one (call ids are drawn per request, so only their presence).
void ExpectSameAnswer(const StreamedChoice& streamed, const ordered_json& choice) {
  INFO("non-streamed: " << choice.dump() << "\nstreamed: content " << ordered_json(streamed.content).dump()
                        << " reasoning " << ordered_json(streamed.reasoning).dump() << " calls "
                        << streamed.tool_calls.dump() << " finish " << streamed.finish_reason);
  const ordered_json& message = choice["message"];
  CHECK(streamed.finish_reason == choice["finish_reason"]);
  CHECK(streamed.content == (message["content"].is_string() ? message["content"].get<std::string>() : ""));
  CHECK(streamed.reasoning == message.value("reasoning_content", ""));
  const ordered_json calls = message.value("tool_calls", ordered_json::array());
  REQUIRE(streamed.tool_calls.size() == calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    CHECK(streamed.tool_calls[i]["function"] == calls[i]["function"]);
    CHECK(!streamed.tool_calls[i]["id"].get<std::string>().empty());
  }
}

// `body` is refused with a 400 in the OpenAI envelope naming `param` (unless empty) whose message holds every
// one of `words`, streamed and not. Returns the non-streamed error.
ordered_json ExpectChatRefused(int port, const ordered_json& body, const std::string& param,
                               const std::vector<std::string>& words) {
  ordered_json error;
  for (const bool stream : {false, true}) {
    ordered_json sent = body;
    sent["stream"] = stream;
    const HttpReply reply = PostJson(port, kChatPath, sent.dump());
    INFO(sent.dump().substr(0, 800) << " -> " << reply.status << " " << reply.error << " " << reply.body);
    CHECK(reply.status == 400);
    CHECK_THAT(reply.Header("Content-Type"), Catch::StartsWith("application/json"));
    const ordered_json envelope = ParseOrderedJson(reply.body);
    REQUIRE(envelope.contains("error"));
    const ordered_json& got = envelope["error"];
    REQUIRE(got["message"].is_string());
    CHECK(got["type"] == "invalid_request_error");
    if (!param.empty()) CHECK(got["param"] == param);
    for (const std::string& word : words) CHECK_THAT(got["message"].get<std::string>(), Catch::Contains(word));
    if (!stream) error = got;
  }
  return error;
}

// The hermes call the regexes below spell; the regex escapes its braces.
constexpr char kCallText[] =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
constexpr char kCallRegex[] =
    "<tool_call>\\n\\{\"name\": \"get_weather\", \"arguments\": \\{\"city\": \"Paris\"\\}\\}\\n</tool_call>";

// A choice that is exactly one call of get_weather with {"city": "Paris"}, and nothing else (but `reasoning`).
void ExpectParisCall(const ordered_json& choice, const std::string& reasoning = "") {
  INFO(choice.dump());
  CHECK(choice["finish_reason"] == "tool_calls");
  const ordered_json& message = choice["message"];
  CHECK(message["role"] == "assistant");
  CHECK((message["content"].is_null() || message["content"] == ""));
  if (reasoning.empty()) {
    CHECK(!message.contains("reasoning_content"));
  } else {
    CHECK(message["reasoning_content"] == reasoning);
  }
  REQUIRE(message["tool_calls"].is_array());
  REQUIRE(message["tool_calls"].size() == 1);
  const ordered_json& call = message["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK_THAT(call["id"].get<std::string>(), Catch::StartsWith("call_"));
  CHECK(call["function"]["name"] == "get_weather");
  REQUIRE(call["function"]["arguments"].is_string());
  CHECK(ParseOrderedJson(call["function"]["arguments"].get<std::string>()) == ordered_json{{"city", "Paris"}});
}

TEST_CASE("tool calling e2e: the OpenAI Node SDK's tools, streaming, runTools and the Responses API",
          "[integration][tools][tool_calls]") {
  // tool_choice required, named and parallel_tool_calls false (arguments validated by zod), streamed calls
  // reassembled against the non-streamed answers, runTools' two-completion loop, a manual round trip;
  // responses.create (text, tool_choice required, function_call/function_call_output input items, store),
  // responses.stream (event order, sequence numbers, deltas against the non-streamed answer).
  if (kSanitized) {
    // Minutes of instrumented decoding (hundreds of sampled tokens per step) for a JavaScript client, whose
    // C++ paths the other cases here and gateway_scripted_test.cc's Responses cases already run.
    WARN("the Node SDK client is left out under sanitizers");
    return;
  }
  const std::string api_key = "sk-llmc-tools";
  ToolCallingCluster cluster({"--api_keys=" + api_key});
  const CommandResult result = RunCommand(
      "/usr/bin/env",
      {"node", std::string(LLMC_SOURCE_DIR) + "/tests/gateway/openai_sdk_tools.mjs",
       std::string(LLMC_TOKENIZER_MODULES) + "/node_modules", cluster.gateway().base_url(), kSmallModelName, api_key},
      absl::Seconds(100));
  INFO("node output:\n" << result.output << "\n(openai and zod come from scripts/fetch-tokenizers.sh)");
  INFO(cluster.Logs());
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("all steps passed"));
}

// With reasoning separated (the default for this model), a structured-output constraint beside tools becomes
// "an optional reasoning block, then the constraint's text or calls" (worker/typed_output/tool_call_grammar.cc),
// so a regex alone does not pin the text: the cases that force exact text send separate_reasoning: false,
// which leaves the regex as the whole constraint; the default path is checked with a strict tool instead.
TEST_CASE("tool calling e2e: the worker's parsers turn forced text into tool calls, reasoning and content",
          "[integration][tools][tool_calls]") {
  ToolCallingCluster cluster;
  const int port = cluster.port();
  const ordered_json tools = ordered_json::array({WeatherTool()});

  {
    INFO("hermes text forced by a regex (separate_reasoning false: the regex is the whole constraint) is a call");
    const ordered_json body = With(WeatherChat(60), {{"tools", tools},
                                                     {"tool_choice", "auto"},
                                                     {"separate_reasoning", false},
                                                     {"structured_outputs", {{"regex", kCallRegex}}}});
    const ordered_json answer = PostOrderedOk(port, kChatPath, body);
    ExpectParisCall(answer["choices"][0]);
    const std::map<int, StreamedChoice> streamed = StreamedChoices(port, body);
    REQUIRE(streamed.size() == 1);
    ExpectSameAnswer(streamed.at(0), answer["choices"][0]);
    // The same text with tool_choice none, or without tools, is content as written.
    for (const ordered_json& fields :
         {ordered_json{{"tool_choice", "none"}}, ordered_json{{"tools", nullptr}, {"tool_choice", nullptr}}}) {
      const ordered_json plain = PostOrderedOk(port, kChatPath, With(body, fields));
      INFO(plain.dump());
      CHECK(plain["choices"][0]["finish_reason"] == "stop");
      CHECK(plain["choices"][0]["message"]["content"] == kCallText);
      CHECK(!plain["choices"][0]["message"].contains("tool_calls"));
    }
  }
  {
    INFO("content before a call, two calls, and a malformed call (kept as content)");
    ordered_json body = With(WeatherChat(120), {{"tools", tools}, {"separate_reasoning", false}});
    body["structured_outputs"] = {{"regex", std::string("Let me check\\.\\n") + kCallRegex}};
    ordered_json answer = PostOrderedOk(port, kChatPath, body);
    ordered_json message = answer["choices"][0]["message"];
    INFO(answer.dump());
    CHECK(answer["choices"][0]["finish_reason"] == "tool_calls");
    REQUIRE(message["content"].is_string());
    CHECK_THAT(message["content"].get<std::string>(), Catch::StartsWith("Let me check."));
    REQUIRE(message["tool_calls"].size() == 1);
    CHECK(ParseOrderedJson(message["tool_calls"][0]["function"]["arguments"]) == ordered_json{{"city", "Paris"}});

    body["structured_outputs"] = {{"regex", std::string(kCallRegex) + "\\n" + kCallRegex}};
    answer = PostOrderedOk(port, kChatPath, body);
    message = answer["choices"][0]["message"];
    INFO(answer.dump());
    CHECK(answer["choices"][0]["finish_reason"] == "tool_calls");
    REQUIRE(message["tool_calls"].size() == 2);
    CHECK(message["tool_calls"][0]["id"] != message["tool_calls"][1]["id"]);
    for (const ordered_json& call : message["tool_calls"]) {
      CHECK(call["function"]["name"] == "get_weather");
      CHECK(ParseOrderedJson(call["function"]["arguments"]) == ordered_json{{"city", "Paris"}});
    }
    const std::map<int, StreamedChoice> streamed = StreamedChoices(port, body);
    ExpectSameAnswer(streamed.at(0), answer["choices"][0]);

    // "arguments" is an array, not an object: not a call, and nothing is lost.
    const std::string malformed = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1]}\n</tool_call>";
    body["structured_outputs"] = {
        {"regex", "<tool_call>\\n\\{\"name\": \"get_weather\", \"arguments\": \\[1\\]\\}\\n</tool_call>"}};
    answer = PostOrderedOk(port, kChatPath, body);
    INFO(answer.dump());
    CHECK(answer["choices"][0]["finish_reason"] == "stop");
    CHECK(answer["choices"][0]["message"]["content"] == malformed);
    CHECK(!answer["choices"][0]["message"].contains("tool_calls"));
  }
  {
    INFO("with reasoning separated (the default), a strict tool: the <tool_call> token forced first is a call");
    // The constraint becomes: an optional reasoning block, then the regex or calls whose arguments follow the
    // strict schema (only "Paris"). Forcing the <tool_call> token first leaves only calls of that one value.
    const int tool_call_token = SingleToken(port, "<tool_call>");
    const ordered_json body = With(WeatherChat(60), {{"tools", ordered_json::array({WeatherTool(/*strict=*/true)})},
                                                     {"tool_choice", "auto"},
                                                     {"parallel_tool_calls", false},
                                                     {"logit_bias", {{std::to_string(tool_call_token), 100}}},
                                                     {"structured_outputs", {{"regex", kCallRegex}}}});
    const ordered_json answer = PostOrderedOk(port, kChatPath, body);
    ExpectParisCall(answer["choices"][0]);
    const std::map<int, StreamedChoice> streamed = StreamedChoices(port, body);
    ExpectSameAnswer(streamed.at(0), answer["choices"][0]);
  }
  {
    INFO("separate_reasoning false keeps a forced reasoning block in the content, as written");
    const std::string text = "<think>\nreasoning text\n</think>\n\nanswer";
    const ordered_json answer =
        PostOrderedOk(port, kChatPath,
                      With(WeatherChat(40),
                           {{"separate_reasoning", false},
                            {"structured_outputs", {{"regex", "<think>\\nreasoning text\\n</think>\\n\\nanswer"}}}}));
    INFO(answer.dump());
    CHECK(answer["choices"][0]["finish_reason"] == "stop");
    CHECK(answer["choices"][0]["message"]["content"] == text);
    CHECK(!answer["choices"][0]["message"].contains("reasoning_content"));
  }
}

// gpt-oss's harmony format: the small GPT-OSS package (the gpt-oss tokenizer, llmc's harmony template, manifest
// tool_call_format "harmony"). Channel text forced by a regex over the whole output is read as the format says.
TEST_CASE("tool calling e2e: a GPT-OSS package reads its harmony channels as reasoning, content and calls",
          "[integration][tools][tool_calls][moe]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallGptOssPackage(), SmallWorkerArgs(controller.address(), "harmony"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());
  const int port = gateway.port();
  const HttpReply models = HttpCall(port, "GET", "/v1/models");
  REQUIRE(models.status == 200);
  const ordered_json chat = With(WeatherChat(80), {{"model", ParseOrderedJson(models.body)["data"][0]["id"]}});
  const std::string analysis = R"(<\|channel\|>analysis<\|message\|>)";
  const std::string next = R"(<\|end\|><\|start\|>assistant)";
  {
    INFO("analysis, then the final answer");
    const ordered_json body =
        With(chat, {{"structured_outputs",
                     {{"regex", analysis + R"(Greet them\.)" + next + R"(<\|channel\|>final<\|message\|>Hello!)"}}}});
    const ordered_json answer = PostOrderedOk(port, kChatPath, body);
    INFO(answer.dump());
    CHECK(answer["choices"][0]["finish_reason"] == "stop");
    CHECK(answer["choices"][0]["message"]["reasoning_content"] == "Greet them.");
    CHECK(answer["choices"][0]["message"]["content"] == "Hello!");
    ExpectSameAnswer(StreamedChoices(port, body).at(0), answer["choices"][0]);
  }
  const std::string call = analysis + R"(Need the weather\.)" + next +
                           R"(<\|channel\|>commentary to=functions\.get_weather <\|constrain\|>json<\|message\|>)" +
                           R"(\{"city": "Paris"\})";
  {
    INFO("analysis, then a call to an offered function");
    const ordered_json body =
        With(chat, {{"tools", ordered_json::array({WeatherTool()})}, {"structured_outputs", {{"regex", call}}}});
    const ordered_json answer = PostOrderedOk(port, kChatPath, body);
    INFO(answer.dump());
    ExpectParisCall(answer["choices"][0], "Need the weather.");
    ExpectSameAnswer(StreamedChoices(port, body).at(0), answer["choices"][0]);
    // tool_choice none: the message is content, the markup gone.
    const ordered_json plain = PostOrderedOk(port, kChatPath, With(body, {{"tool_choice", "none"}}));
    INFO(plain.dump());
    CHECK(plain["choices"][0]["finish_reason"] == "stop");
    CHECK(plain["choices"][0]["message"]["content"] == R"({"city": "Paris"})");
    CHECK(!plain["choices"][0]["message"].contains("tool_calls"));
  }
  {
    INFO("reasoning_effort reaches the harmony template");
    for (const std::string effort : {"low", "high"}) {
      const ordered_json tokens = PostOrderedOk(
          port, "/tokenize", {{"model", chat["model"]}, {"messages", chat["messages"]}, {"reasoning_effort", effort}});
      const ordered_json text =
          PostOrderedOk(port, "/detokenize", {{"model", chat["model"]}, {"tokens", tokens["tokens"]}});
      CHECK_THAT(text["prompt"].get<std::string>(), Catch::Contains("Reasoning: " + effort));
    }
  }
  {
    INFO("a tool round trip renders through the harmony template; what it cannot constrain is a 400");
    ordered_json round_trip = With(chat, {{"tools", ordered_json::array({WeatherTool()})}});
    round_trip["messages"].push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          ordered_json::array({{{"id", "call_1"},
                                {"type", "function"},
                                {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}}})}});
    round_trip["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Sunny, 21 C"}});
    const ordered_json answer = PostOrderedOk(port, kChatPath, round_trip);
    CHECK(answer["usage"]["prompt_tokens"].get<int>() > 20);
    for (const ordered_json& fields :
         {ordered_json{{"tool_choice", "required"}}, ordered_json{{"response_format", {{"type", "json_object"}}}}}) {
      const HttpReply refused = PostJson(port, kChatPath, With(round_trip, fields).dump());
      INFO(fields.dump() << " -> " << refused.status << " " << refused.body);
      CHECK(refused.status == 400);
      CHECK_THAT(refused.body, Catch::Contains("harmony"));
    }
  }
}

TEST_CASE("tool calling e2e: reasoning is split from the content exactly where the model's tokens say",
          "[integration][tools][tool_calls]") {
  // With reasoning separated, a constraint applies after an optional reasoning block whose text is free, so a
  // regex cannot force the reasoning. Instead the sampled tokens are restricted to a few (<think>, </think>,
  // "\n\n", " sea", "answer"), the answer after the block must be "answer", and each choice's token ids
  // (logprobs) say where its reasoning is: the parser's reasoning_content and content must match them.
  ToolCallingCluster cluster;
  const int port = cluster.port();
  const int think = SingleToken(port, "<think>");
  const int think_end = SingleToken(port, "</think>");
  const int blank = SingleToken(port, "\n\n");
  const int sea = SingleToken(port, " sea");
  const int answer_token = SingleToken(port, "answer");
  const std::map<int, std::string> texts = {
      {think, "<think>"}, {think_end, "</think>"}, {blank, "\n\n"}, {sea, " sea"}, {answer_token, "answer"}};
  constexpr int kChoices = 8;
  // tools with tool_choice auto: the answer is parsed for calls too (none can be spelled with these tokens).
  const ordered_json body = With(WeatherChat(40), {{"n", kChoices},
                                                   {"temperature", 1},
                                                   {"seed", 5},
                                                   {"logprobs", true},
                                                   {"return_tokens_as_token_ids", true},
                                                   {"tools", ordered_json::array({WeatherTool()})},
                                                   {"allowed_token_ids", {think, think_end, blank, sea, answer_token}},
                                                   {"structured_outputs", {{"regex", "answer"}}}});
  const ordered_json answer = PostOrderedOk(port, kChatPath, body);
  REQUIRE(answer["choices"].size() == kChoices);
  int with_reasoning = 0;
  std::vector<std::vector<int>> all_ids;
  for (const ordered_json& choice : answer["choices"]) {
    const std::vector<int> ids = ChatTokenIds(choice);
    all_ids.push_back(ids);
    INFO(choice.dump() << "\ntoken ids: " << ordered_json(ids).dump());
    const ordered_json& message = choice["message"];
    CHECK(choice["finish_reason"] == "stop");
    CHECK(message["content"] == "answer");
    CHECK(!message.contains("tool_calls"));
    REQUIRE(!ids.empty());
    std::string expected_reasoning;
    if (ids[0] == think) {
      size_t end = 1;
      while (end < ids.size() && ids[end] != think_end) expected_reasoning += texts.at(ids[end++]);
      REQUIRE(end < ids.size());
      ++with_reasoning;
    } else {
      CHECK(ids == std::vector<int>{answer_token});
    }
    if (expected_reasoning.empty()) {
      CHECK(!message.contains("reasoning_content"));
    } else {
      CHECK(message["reasoning_content"] == expected_reasoning);
      CHECK(message["reasoning"] == expected_reasoning);  // vLLM's newer name
    }
  }
  INFO(answer.dump());
  // Sampled among two first tokens, some choices open a reasoning block.
  CHECK(with_reasoning > 0);

  {
    INFO("streamed, reasoning_content deltas and content deltas reassemble the same choices");
    const std::map<int, StreamedChoice> streamed = StreamedChoices(port, body);
    REQUIRE(streamed.size() == kChoices);
    for (int i = 0; i < kChoices; ++i) ExpectSameAnswer(streamed.at(i), answer["choices"][i]);
  }
  {
    // The same prompt (the tools are still shown to the model), so the same tokens.
    INFO("tool_choice none (a constraint after the reasoning block alone, no call parsing): the same answers");
    const ordered_json plain = PostOrderedOk(port, kChatPath, With(body, {{"tool_choice", "none"}}));
    REQUIRE(plain["choices"].size() == kChoices);
    for (int i = 0; i < kChoices; ++i) {
      INFO(plain["choices"][i].dump());
      CHECK(ChatTokenIds(plain["choices"][i]) == all_ids[i]);
      CHECK(plain["choices"][i]["message"] == answer["choices"][i]["message"]);
    }
  }
  {
    INFO("include_reasoning false: the same tokens, the reasoning dropped");
    const ordered_json dropped = PostOrderedOk(port, kChatPath, With(body, {{"include_reasoning", false}}));
    REQUIRE(dropped["choices"].size() == kChoices);
    for (int i = 0; i < kChoices; ++i) {
      const ordered_json& choice = dropped["choices"][i];
      INFO(choice.dump());
      CHECK(ChatTokenIds(choice) == all_ids[i]);
      CHECK(choice["message"]["content"] == "answer");
      CHECK(!choice["message"].contains("reasoning_content"));
      CHECK(!choice["message"].contains("reasoning"));
    }
  }
}

// A conversation with an assistant turn that called get_weather twice and both results; `content` is the
// assistant turn's content ("" or null, or absent when `content` is nullopt).
ordered_json RoundTripMessages(const std::optional<ordered_json>& content) {
  ordered_json assistant = {
      {"role", "assistant"},
      {"tool_calls",
       ordered_json::array({{{"id", "call_abc123"},
                             {"type", "function"},
                             {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}},
                            {{"id", "call_def456"},
                             {"type", "function"},
                             {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Lima\"}"}}}}})}};
  if (content.has_value()) assistant["content"] = *content;
  return ordered_json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}},
                              assistant,
                              {{"role", "tool"}, {"tool_call_id", "call_abc123"}, {"content", "21 degrees and sunny"}},
                              {{"role", "tool"}, {"tool_call_id", "call_def456"}, {"content", "15 degrees, fog"}}});
}

// The round trip is served, and /tokenize of the same messages renders them as Qwen3's template writes calls
// and results.
void ExpectRoundTrip(int port, const ordered_json& messages) {
  const ordered_json tools = ordered_json::array({WeatherTool()});
  const HttpReply reply = PostJson(
      port, kChatPath,
      ordered_json{
          {"model", kSmallModelName}, {"messages", messages}, {"tools", tools}, {"max_tokens", 4}, {"temperature", 0}}
          .dump());
  INFO(messages.dump() << " -> " << reply.status << " " << reply.body.substr(0, 1200));
  CHECK(reply.status == 200);
  if (reply.status != 200) return;
  const ordered_json answer = ParseOrderedJson(reply.body);
  REQUIRE(answer["choices"].size() == 1);
  CHECK(answer["choices"][0]["message"]["role"] == "assistant");

  const ordered_json tokenized =
      PostOrderedOk(port, "/tokenize", {{"model", kSmallModelName}, {"messages", messages}, {"tools", tools}});
  const std::vector<int> ids = tokenized["tokens"].get<std::vector<int>>();
  CHECK(tokenized["count"] == ids.size());
  // The chat request's prompt is that conversation with the generation prompt.
  const ordered_json with_prompt = PostOrderedOk(
      port, "/tokenize",
      {{"model", kSmallModelName}, {"messages", messages}, {"tools", tools}, {"add_generation_prompt", true}});
  CHECK(answer["usage"]["prompt_tokens"] == with_prompt["count"]);
  const std::string text = DetokenizeIds(port, ids);
  INFO("rendered:\n" << text);
  CHECK_THAT(text, Catch::Contains("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""));
  CHECK_THAT(text, Catch::Contains("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                   "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
                                   "\"arguments\": {\"city\": \"Lima\"}}\n</tool_call><|im_end|>"));
  // Consecutive tool results go in one user turn.
  CHECK_THAT(text, Catch::Contains("<|im_start|>user\n<tool_response>\n21 degrees and sunny\n</tool_response>\n"
                                   "<tool_response>\n15 degrees, fog\n</tool_response><|im_end|>"));
}

TEST_CASE("tool calling e2e: a tool round trip renders with the model's template, and bad tool requests are 400s",
          "[integration][tools][tool_calls]") {
  ToolCallingCluster cluster;
  const int port = cluster.port();
  const ordered_json tools = ordered_json::array({WeatherTool()});

  {
    INFO("an assistant call (content \"\") and the tool's results: served, and rendered by Qwen3's template");
    ExpectRoundTrip(port, RoundTripMessages(ordered_json("")));
  }
  {
    INFO("an unknown named tool");
    ExpectChatRefused(
        port,
        With(WeatherChat(4),
             {{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}),
        "tool_choice.function.name", {"get_time"});
  }
  {
    INFO("tool_choice required without tools, or with only tools of other types");
    ExpectChatRefused(port, With(WeatherChat(4), {{"tool_choice", "required"}}), "tool_choice", {"tools"});
    ExpectChatRefused(
        port,
        With(WeatherChat(4), {{"tool_choice", "required"}, {"tools", ordered_json::array({{{"type", "web_search"}}})}}),
        "tool_choice", {"tools"});
  }
  {
    INFO("a schema keyword the grammar cannot enforce names the tool's parameters");
    ordered_json unique = WeatherTool();
    unique["function"]["name"] = "tag_city";
    unique["function"]["parameters"]["properties"]["tags"] = {
        {"type", "array"}, {"items", {{"type", "string"}}}, {"uniqueItems", true}};
    const ordered_json error =
        ExpectChatRefused(port, With(WeatherChat(4), {{"tools", {WeatherTool(), unique}}, {"tool_choice", "required"}}),
                          "", {"tools[1].function.parameters", "uniqueItems"});
    INFO(error.dump());
    CHECK((error["param"].is_null() || error["param"] == "tools[1].function.parameters"));
  }
  {
    INFO("tools of other types are left out, not refused");
    const ordered_json answer = PostOrderedOk(
        port, kChatPath,
        With(WeatherChat(4),
             {{"tools", ordered_json::array({{{"type", "web_search"}}, {{"type", "custom"}, {"name", "x"}}, tools[0]})},
              {"tool_choice", "auto"}}));
    CHECK(answer["choices"].size() == 1);
  }
  // After the refusals the cluster still serves a forced call (no reasoning block, so it always finishes).
  const ordered_json forced =
      PostOrderedOk(port, kChatPath,
                    With(WeatherChat(80), {{"tools", ordered_json::array({WeatherTool(/*strict=*/true)})},
                                           {"tool_choice", "required"},
                                           {"separate_reasoning", false},
                                           {"parallel_tool_calls", false}}));
  ExpectParisCall(forced["choices"][0]);
}

// Regressions: each case below holds a defect found while writing these tests (see their comments).

TEST_CASE("tool calling e2e: an assistant turn with content null or left out (as the OpenAI SDK sends it) is served",
          "[integration][tools][tool_calls]") {
  // OpenAI's assistant message that only called tools has "content": null (the Node SDK's runTools sends it
  // back so); vLLM hands templates "" for it. Qwen3's template tests '</think>' in message.content.
  ToolCallingCluster cluster;
  const int port = cluster.port();
  {
    INFO("content null");
    ExpectRoundTrip(port, RoundTripMessages(ordered_json(nullptr)));
  }
  {
    INFO("content left out");
    ExpectRoundTrip(port, RoundTripMessages(std::nullopt));
  }
}

TEST_CASE("tool calling e2e: a refused tool schema is named by its index in the client's tools",
          "[integration][tools][tool_calls]") {
  // Tools of other types are left out before the worker sees the tools; its message must still count them.
  ToolCallingCluster cluster;
  ordered_json unique = WeatherTool();
  unique["function"]["name"] = "tag_city";
  unique["function"]["parameters"]["properties"]["tags"] = {
      {"type", "array"}, {"items", {{"type", "string"}}}, {"uniqueItems", true}};
  const ordered_json mixed = ordered_json::array({{{"type", "web_search"}}, WeatherTool(), unique});
  const ordered_json error =
      ExpectChatRefused(cluster.port(), With(WeatherChat(4), {{"tools", mixed}, {"tool_choice", "required"}}), "",
                        {"tools[2].function.parameters", "uniqueItems"});
  INFO(error.dump());
  CHECK((error["param"].is_null() || error["param"] == "tools[2].function.parameters"));
}

TEST_CASE("tool calling e2e: a structured-output constraint without tools is served by the reasoning model",
          "[integration][tools][tool_calls]") {
  // The manifest's reasoning markers make the worker wrap every constraint as "an optional reasoning block,
  // then the constraint"; a request without tools (or with tool_choice none) has no tool-call format there.
  ToolCallingCluster cluster;
  const int port = cluster.port();
  for (const ordered_json& fields :
       {ordered_json{{"guided_choice", {"yes", "no"}}}, ordered_json{{"tools", ordered_json::array({WeatherTool()})},
                                                                     {"tool_choice", "none"},
                                                                     {"guided_choice", {"yes", "no"}}}}) {
    const HttpReply reply = PostJson(port, kChatPath, With(WeatherChat(40), fields).dump());
    INFO(fields.dump() << " -> " << reply.status << " " << reply.body);
    CHECK(reply.status == 200);
    if (reply.status != 200) continue;
    const ordered_json answer = ParseOrderedJson(reply.body);
    const ordered_json& choice = answer["choices"][0];
    if (choice["finish_reason"] == "stop") {
      const std::string content = choice["message"]["content"].get<std::string>();
      CHECK((content == "yes" || content == "no"));
    }
  }
}

}  // namespace
}  // namespace llmc::testing
