#include "gateway/openai/openai_request.h"

#include <string>
#include <vector>

#include "gateway/openai/openai_error.h"
#include "nlohmann/json.hpp"
#include "tests/gateway/openai_request_parsing.h"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;

TEST_CASE("openai_request: a minimal chat request", "[unit][openai]") {
  const absl::StatusOr<OpenAiRequest> request = Chat();
  REQUIRE(request.ok());
  CHECK(request->kind == OpenAiKind::kChat);
  CHECK(request->model == "qwen");
  CHECK(request->generate.model() == "qwen");
  CHECK_FALSE(request->stream);
  CHECK_FALSE(request->include_usage);
  CHECK_FALSE(request->logprobs);
  CHECK(request->num_choices() == 1);
  REQUIRE(request->generate.has_chat());
  CHECK(json::parse(request->generate.chat().messages_json()) == json::parse(R"([{"role":"user","content":"hi"}])"));
  CHECK(request->generate.chat().tools_json().empty());
  CHECK(request->generate.chat().chat_template().empty());
  CHECK_FALSE(request->generate.chat().has_add_generation_prompt());
  const v1::SamplingParams& sampling = request->generate.sampling();
  CHECK_FALSE(sampling.has_max_tokens());
  CHECK_FALSE(sampling.has_temperature());
  CHECK_FALSE(sampling.has_top_p());
  CHECK_FALSE(sampling.has_seed());
  CHECK_FALSE(sampling.has_skip_special_tokens());
  CHECK(sampling.stop_size() == 0);
  CHECK(request->generate.user().empty());
}

TEST_CASE("openai_request: every sampling parameter reaches SamplingParams", "[unit][openai]") {
  const json extra = {{"max_tokens", 64},
                      {"temperature", 0.7},
                      {"top_p", 0.9},
                      {"top_k", 40},
                      {"min_p", 0.05},
                      {"presence_penalty", 0.5},
                      {"frequency_penalty", -0.5},
                      {"repetition_penalty", 1.1},
                      {"seed", 1234},
                      {"stop", {"\n\n", "END"}},
                      {"stop_token_ids", {7, 9}},
                      {"n", 3},
                      {"ignore_eos", true},
                      {"min_tokens", 5},
                      {"skip_special_tokens", false},
                      {"include_stop_str_in_output", true},
                      {"user", "alice"}};
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const absl::StatusOr<OpenAiRequest> request = chat ? Chat(extra) : Completion(extra);
    REQUIRE(request.ok());
    const v1::SamplingParams& s = request->generate.sampling();
    CHECK(s.max_tokens() == 64);
    CHECK(s.temperature() == Approx(0.7));
    CHECK(s.top_p() == Approx(0.9));
    CHECK(s.top_k() == 40);
    CHECK(s.min_p() == Approx(0.05));
    CHECK(s.presence_penalty() == Approx(0.5));
    CHECK(s.frequency_penalty() == Approx(-0.5));
    CHECK(s.repetition_penalty() == Approx(1.1));
    CHECK(s.seed() == 1234);
    REQUIRE(s.stop_size() == 2);
    CHECK(s.stop(0) == "\n\n");
    CHECK(s.stop(1) == "END");
    REQUIRE(s.stop_token_ids_size() == 2);
    CHECK(s.stop_token_ids(0) == 7);
    CHECK(s.stop_token_ids(1) == 9);
    CHECK(s.n() == 3);
    CHECK(request->num_choices() == 3);
    CHECK(s.ignore_eos());
    CHECK(s.min_tokens() == 5);
    REQUIRE(s.has_skip_special_tokens());
    CHECK_FALSE(s.skip_special_tokens());
    CHECK(s.include_stop_str_in_output());
    CHECK(request->generate.user() == "alice");
  }
}

TEST_CASE("openai_request: temperature 0 and top_k -1 are legal", "[unit][openai]") {
  const absl::StatusOr<OpenAiRequest> request = Chat({{"temperature", 0}, {"top_k", -1}, {"top_p", 1}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().has_temperature());
  CHECK(request->generate.sampling().temperature() == 0);
  CHECK(request->generate.sampling().top_k() == -1);
  CHECK(request->generate.sampling().top_p() == 1);
}

TEST_CASE("openai_request: max_completion_tokens wins over max_tokens for chat", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Chat({{"max_tokens", 10}, {"max_completion_tokens", 20}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().max_tokens() == 20);
  request = Chat({{"max_completion_tokens", 30}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().max_tokens() == 30);
  request = Chat({{"max_tokens", 10}, {"max_completion_tokens", nullptr}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().max_tokens() == 10);
  ExpectInvalid(Chat({{"max_completion_tokens", 0}}), "max_completion_tokens");
  ExpectInvalid(Chat({{"max_completion_tokens", 8}, {"min_tokens", 9}}), "min_tokens", "max_completion_tokens");
  // The completions endpoint has no such parameter; it is ignored like any unknown field.
  request = Completion({{"max_tokens", 10}, {"max_completion_tokens", 20}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().max_tokens() == 10);
}

TEST_CASE("openai_request: stop as a string or a list", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Chat({{"stop", "###"}});
  REQUIRE(request.ok());
  REQUIRE(request->generate.sampling().stop_size() == 1);
  CHECK(request->generate.sampling().stop(0) == "###");
  request = Chat({{"stop", json::array()}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().stop_size() == 0);
  request = Chat({{"stop", nullptr}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().stop_size() == 0);
  json sixteen = json::array();
  for (int i = 0; i < 16; ++i) sixteen.push_back("s" + std::to_string(i));
  request = Chat({{"stop", sixteen}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().stop_size() == 16);
  sixteen.push_back("one too many");
  ExpectInvalid(Chat({{"stop", sixteen}}), "stop", "at most 16");
  ExpectInvalid(Chat({{"stop", ""}}), "stop", "empty");
  ExpectInvalid(Chat({{"stop", {"a", ""}}}), "stop", "empty");
  ExpectInvalid(Chat({{"stop", {"a", 3}}}), "stop", "string");
  ExpectInvalid(Chat({{"stop", 3}}), "stop", "string");
}

TEST_CASE("openai_request: stop_token_ids must be token ids", "[unit][openai]") {
  ExpectInvalid(Chat({{"stop_token_ids", 5}}), "stop_token_ids");
  ExpectInvalid(Chat({{"stop_token_ids", {1, "2"}}}), "stop_token_ids");
  ExpectInvalid(Chat({{"stop_token_ids", {-1}}}), "stop_token_ids");
  ExpectInvalid(Chat({{"stop_token_ids", {1.5}}}), "stop_token_ids");
  ExpectInvalid(Chat({{"stop_token_ids", {4294967296LL}}}), "stop_token_ids");
}

TEST_CASE("openai_request: seeds may be negative or as large as uint64", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Chat({{"seed", -1}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().seed() == 0xFFFFFFFFFFFFFFFFull);
  request = Chat({{"seed", 18446744073709551615ull}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().seed() == 18446744073709551615ull);
  request = Chat({{"seed", 0}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().has_seed());
  ExpectInvalid(Chat({{"seed", "42"}}), "seed");
  ExpectInvalid(Chat({{"seed", 1.5}}), "seed");
}

TEST_CASE("openai_request: chat content parts go to the worker as they are", "[unit][openai]") {
  const json messages = json::array(
      {{{"role", "user"},
        {"content", json::array({{{"type", "text"}, {"text", "first"}}, {{"type", "text"}, {"text", "second"}}})}}});
  absl::StatusOr<OpenAiRequest> request = Chat({{"messages", messages}});
  REQUIRE(request.ok());
  CHECK(json::parse(request->generate.chat().messages_json()) == messages);

  const json image =
      json::array({{{"role", "user"},
                    {"content", json::array({{{"type", "text"}, {"text", "look"}},
                                             {{"type", "image_url"}, {"image_url", {{"url", "x"}}}}})}}});
  ExpectInvalid(Chat({{"messages", image}}), "messages[0].content[1].type", "image_url");
  const json no_text = json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}}})}}});
  ExpectInvalid(Chat({{"messages", no_text}}), "messages[0].content[0].text");
  const json no_type = json::array({{{"role", "user"}, {"content", json::array({{{"text", "x"}}})}}});
  ExpectInvalid(Chat({{"messages", no_type}}), "messages[0].content[0].type");
  const json bare_string = json::array({{{"role", "user"}, {"content", json::array({"x"})}}});
  ExpectInvalid(Chat({{"messages", bare_string}}), "messages[0].content[0]");
  const json number = json::array({{{"role", "user"}, {"content", 5}}});
  ExpectInvalid(Chat({{"messages", number}}), "messages[0].content");
}

TEST_CASE("openai_request: roles, names and the generation prompt", "[unit][openai]") {
  const json messages = json::array({{{"role", "developer"}, {"content", "be brief"}},
                                     {{"role", "system"}, {"content", "sys"}},
                                     {{"role", "user"}, {"content", "q"}, {"name", "bob"}},
                                     {{"role", "assistant"}, {"content", nullptr}},
                                     {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "call_1"}},
                                     {{"role", "assistant"}}});
  const absl::StatusOr<OpenAiRequest> request = Chat({{"messages", messages}, {"add_generation_prompt", false}});
  REQUIRE(request.ok());
  const v1::ChatInput& chat = request->generate.chat();
  const json forwarded = json::parse(chat.messages_json());
  REQUIRE(forwarded.size() == 6);
  CHECK(forwarded[0] == json{{"role", "system"}, {"content", "be brief"}});  // developer is system
  CHECK(forwarded[1]["role"] == "system");
  CHECK(forwarded[2]["name"] == "bob");
  // A tool-only assistant turn's null or missing content reaches templates as "" (Qwen3's tests it as a string).
  CHECK(forwarded[3] == json{{"role", "assistant"}, {"content", ""}});
  CHECK(forwarded[4] == json{{"role", "tool"}, {"content", "42"}, {"tool_call_id", "call_1"}});
  CHECK(forwarded[5] == json{{"role", "assistant"}, {"content", ""}});
  REQUIRE(chat.has_add_generation_prompt());
  CHECK_FALSE(chat.add_generation_prompt());

  ExpectInvalid(Chat({{"messages", json::array({{{"role", "robot"}, {"content", "x"}}})}}), "messages[0].role",
                "robot");
  ExpectInvalid(Chat({{"messages", json::array({{{"content", "x"}}})}}), "messages[0].role");
  ExpectInvalid(Chat({{"messages", json::array({{{"role", 1}, {"content", "x"}}})}}), "messages[0].role");
  ExpectInvalid(Chat({{"messages", json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "user"}}})}}),
                "messages[1].content", "required");
  ExpectInvalid(Chat({{"messages", json::array({{{"role", "user"}, {"content", "a"}, {"name", 3}}})}}),
                "messages[0].name");
  ExpectInvalid(Chat({{"messages", json::array({"hello"})}}), "messages[0]");
  ExpectInvalid(Chat({{"add_generation_prompt", "yes"}}), "add_generation_prompt");
}

TEST_CASE("openai_request: messages are required and non-empty", "[unit][openai]") {
  json body = ChatBody();
  body.erase("messages");
  ExpectInvalid(ParseChatCompletionRequest(body.dump()), "messages", "required");
  ExpectInvalid(Chat({{"messages", nullptr}}), "messages", "required");
  ExpectInvalid(Chat({{"messages", json::array()}}), "messages", "at least one");
  ExpectInvalid(Chat({{"messages", "hi"}}), "messages", "array");
}

TEST_CASE("openai_request: model is required", "[unit][openai]") {
  json body = ChatBody();
  body.erase("model");
  ExpectInvalid(ParseChatCompletionRequest(body.dump()), "model");
  ExpectInvalid(Chat({{"model", ""}}), "model");
  ExpectInvalid(Chat({{"model", 7}}), "model", "string");
  json completion = CompletionBody();
  completion.erase("model");
  ExpectInvalid(ParseCompletionRequest(completion.dump()), "model");
}

TEST_CASE("openai_request: a wrong JSON type is named for every field", "[unit][openai]") {
  const std::vector<std::pair<std::string, json>> cases = {
      {"max_tokens", "10"},
      {"max_completion_tokens", true},
      {"temperature", "hot"},
      {"top_p", true},
      {"top_k", "5"},
      {"top_k", 2.5},
      {"min_p", json::array()},
      {"presence_penalty", "0"},
      {"frequency_penalty", json::object()},
      {"repetition_penalty", "1"},
      {"seed", true},
      {"stop_token_ids", "1"},
      {"n", "2"},
      {"n", 1.5},
      {"ignore_eos", 1},
      {"min_tokens", "1"},
      {"skip_special_tokens", "false"},
      {"include_stop_str_in_output", 0},
      {"user", 5},
      {"stream", "true"},
      {"stream_options", true},
      {"logprobs", 1},
      {"top_logprobs", "2"},
      {"add_generation_prompt", 1},
      {"logit_bias", json::array()},
  };
  for (const auto& [field, value] : cases) {
    INFO(field << " = " << value.dump());
    ExpectInvalid(Chat({{field, value}}), field, "'" + field + "' must be");
  }
  const std::vector<std::pair<std::string, json>> completion_cases = {
      {"prompt", 5}, {"prompt", json::object()}, {"echo", "yes"}, {"logprobs", true}, {"logprobs", 1.5},
      {"suffix", 1}, {"best_of", "2"},
  };
  for (const auto& [field, value] : completion_cases) {
    INFO(field << " = " << value.dump());
    ExpectInvalid(Completion({{field, value}}), field);
  }
}

TEST_CASE("openai_request: out-of-range values are named", "[unit][openai]") {
  const std::vector<std::pair<std::string, json>> cases = {
      {"temperature", -0.1},
      {"temperature", 2.01},
      {"top_p", 0},
      {"top_p", 1.5},
      {"top_p", -1},
      {"top_k", -2},
      {"min_p", 1.5},
      {"min_p", -0.1},
      {"presence_penalty", 2.5},
      {"presence_penalty", -3},
      {"frequency_penalty", 2.1},
      {"frequency_penalty", -2.1},
      {"repetition_penalty", 0},
      {"repetition_penalty", -1},
      {"max_tokens", 0},
      {"max_tokens", -5},
      {"min_tokens", -1},
      {"top_logprobs", 21},
      {"top_logprobs", -1},
  };
  for (const auto& [field, value] : cases) {
    INFO(field << " = " << value.dump());
    ExpectInvalid(Chat({{field, value}}), field);
  }
  ExpectInvalid(Chat({{"max_tokens", 8}, {"min_tokens", 9}}), "min_tokens");
  CHECK(Chat({{"temperature", 2},
              {"presence_penalty", -2},
              {"frequency_penalty", 2},
              {"top_logprobs", 20},
              {"logprobs", true}})
            .ok());
}

TEST_CASE("openai_request: huge numbers are rejected, not overflowed", "[unit][openai]") {
  ExpectInvalid(ParseChatCompletionRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}],
                                               "max_tokens":1e12})"),
                "max_tokens");
  ExpectInvalid(Chat({{"max_tokens", 1000000000000LL}}), "max_tokens");
  ExpectInvalid(Chat({{"max_tokens", 4294967297LL}}), "max_tokens");  // would wrap to 1 in a uint32
  ExpectInvalid(Chat({{"max_tokens", 18446744073709551615ull}}), "max_tokens");
  ExpectInvalid(ParseChatCompletionRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}],
                                               "max_tokens":1e300})"),
                "max_tokens");
  ExpectInvalid(ParseChatCompletionRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}],
                                               "n":1e300})"),
                "n");
  ExpectInvalid(Chat({{"n", 18446744073709551615ull}}), "n");
  ExpectInvalid(Chat({{"top_k", 4294967296LL}}), "top_k");
  ExpectInvalid(Chat({{"temperature", 1e300}}), "temperature");
  ExpectInvalid(Completion({{"prompt", {1, 18446744073709551615ull}}}), "prompt");
  // An integral float is an integer.
  const absl::StatusOr<OpenAiRequest> request = Chat({{"max_tokens", 100.0}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().max_tokens() == 100);
  ExpectInvalid(Chat({{"max_tokens", 100.5}}), "max_tokens", "integer");
}

TEST_CASE("openai_request: n is between 1 and 16", "[unit][openai]") {
  ExpectInvalid(Chat({{"n", 0}}), "n", "between 1 and 16");
  ExpectInvalid(Chat({{"n", 17}}), "n", "at most 16 choices");
  ExpectInvalid(Chat({{"n", -1}}), "n");
  const absl::StatusOr<OpenAiRequest> request = Chat({{"n", 16}});
  REQUIRE(request.ok());
  CHECK(request->num_choices() == 16);
}

TEST_CASE("openai_request: malformed bodies are 400s without a parameter", "[unit][openai]") {
  for (const std::string body : {"", "{", "{\"model\": }", "not json", "{\"model\":\"m\",}", "{} trailing"}) {
    INFO(body);
    ExpectInvalid(ParseChatCompletionRequest(body), "", "could not parse the JSON body");
    ExpectInvalid(ParseCompletionRequest(body), "", "could not parse the JSON body");
  }
  const absl::StatusOr<OpenAiRequest> not_object = ParseChatCompletionRequest("[1, 2]");
  ExpectInvalid(not_object, "", "JSON object");
  CHECK_THAT(std::string(not_object.status().message()), Catch::Contains("array"));
  ExpectInvalid(ParseCompletionRequest("\"prompt\""), "", "JSON object");
  ExpectInvalid(ParseChatCompletionRequest("null"), "", "JSON object");
  // The parser quotes what it read; a huge unterminated string is not echoed back whole.
  const absl::StatusOr<OpenAiRequest> unterminated =
      ParseCompletionRequest("{\"model\":\"m\",\"prompt\":\"" + std::string(100000, 'a'));
  ExpectInvalid(unterminated, "", "could not parse the JSON body");
  CHECK(unterminated.status().message().size() < 1000);
}

TEST_CASE("openai_request: invalid UTF-8 anywhere is a 400", "[unit][openai]") {
  const std::string in_content = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\xfe\"}]}";
  ExpectInvalid(ParseChatCompletionRequest(in_content), "", "UTF-8");
  const std::string in_key = "{\"model\":\"m\",\"\xc3\":1,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}";
  ExpectInvalid(ParseChatCompletionRequest(in_key), "", "UTF-8");
  const std::string truncated = "{\"model\":\"m\",\"prompt\":\"\xe4\xb8\"}";
  ExpectInvalid(ParseCompletionRequest(truncated), "", "UTF-8");
  const std::string overlong = "{\"model\":\"m\",\"prompt\":\"\xc0\xaf\"}";
  ExpectInvalid(ParseCompletionRequest(overlong), "", "UTF-8");
  // A lone surrogate in a \u escape cannot become UTF-8 either.
  ExpectInvalid(ParseCompletionRequest(R"({"model":"m","prompt":"\ud800"})"), "", "could not parse");
  // Well-formed non-ASCII text passes through untouched.
  const absl::StatusOr<OpenAiRequest> request =
      ParseCompletionRequest(R"({"model":"m","prompt":"日本語 😀 \u00e9 \ud83d\ude00"})");
  REQUIRE(request.ok());
  CHECK(request->generate.prompt() == "日本語 😀 é 😀");
}

TEST_CASE("openai_request: stream and stream_options", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Chat({{"stream", true}, {"stream_options", {{"include_usage", true}}}});
  REQUIRE(request.ok());
  CHECK(request->stream);
  CHECK(request->include_usage);
  request = Chat({{"stream", true}, {"stream_options", {{"include_usage", false}}}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->include_usage);
  request = Chat({{"stream", false}, {"stream_options", nullptr}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->stream);
  ExpectInvalid(Chat({{"stream_options", {{"include_usage", true}}}}), "stream_options", "stream");
  ExpectInvalid(Chat({{"stream", false}, {"stream_options", {{"include_usage", true}}}}), "stream_options");
  ExpectInvalid(Completion({{"stream_options", json::object()}}), "stream_options");
  ExpectInvalid(Chat({{"stream", true}, {"stream_options", {{"include_usage", "yes"}}}}),
                "stream_options.include_usage");
  request = Completion({{"stream", true}, {"stream_options", {{"include_usage", true}}}});
  REQUIRE(request.ok());
  CHECK(request->include_usage);
}

TEST_CASE("openai_request: completion prompt forms", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Completion();
  REQUIRE(request.ok());
  CHECK(request->kind == OpenAiKind::kCompletion);
  CHECK(request->generate.prompt() == "Once upon a time");

  request = Completion({{"prompt", {"single"}}});
  REQUIRE(request.ok());
  CHECK(request->generate.prompt() == "single");

  request = Completion({{"prompt", {1, 2, 3}}});
  REQUIRE(request.ok());
  REQUIRE(request->generate.has_prompt_token_ids());
  CHECK(std::vector<int32_t>(request->generate.prompt_token_ids().ids().begin(),
                             request->generate.prompt_token_ids().ids().end()) == std::vector<int32_t>{1, 2, 3});

  request = Completion({{"prompt", json::array({json::array({4, 5})})}});
  REQUIRE(request.ok());
  REQUIRE(request->generate.has_prompt_token_ids());
  CHECK(request->generate.prompt_token_ids().ids_size() == 2);

  // Several prompts: the first is `generate`'s input, the rest are copies with their own.
  request = Completion({{"prompt", {"a", "b", "c"}}, {"n", 2}, {"echo", true}, {"max_tokens", 5}});
  REQUIRE(request.ok());
  CHECK(request->generate.prompt() == "a");
  REQUIRE(request->further_prompts.size() == 2);
  CHECK(request->further_prompts[1].prompt() == "c");
  CHECK(request->further_prompts[1].sampling().max_tokens() == 5);
  CHECK(request->total_choices() == 6);
  CHECK(request->echo_texts == std::vector<std::string>{"a", "b", "c"});
  request = Completion({{"prompt", json::array({json::array({1}), json::array({2, 3})})}});
  REQUIRE(request.ok());
  REQUIRE(request->further_prompts.size() == 1);
  CHECK(request->further_prompts[0].prompt_token_ids().ids_size() == 2);
  ExpectInvalid(Completion({{"prompt", json::array({json::array({1}), json::array()})}}), "prompt[1]", "empty");
  ExpectInvalid(Completion({{"prompt", json::array({json::array({1}), json::array({-1})})}}), "prompt[1]");
  ExpectInvalid(Completion({{"prompt", std::vector<std::string>(257, "x")}}), "prompt", "at most 256");
  ExpectInvalid(Completion({{"prompt", std::vector<std::string>(100, "x")}, {"n", 16}}), "prompt", "1024");
  ExpectInvalid(Completion({{"prompt", {"a", "b"}}, {"echo", true}, {"stream", true}, {"n", 1}, {"best_of", 2}}),
                "best_of");
  ExpectInvalid(Completion({{"prompt", json::array()}}), "prompt", "empty");
  ExpectInvalid(Completion({{"prompt", json::array({json::array()})}}), "prompt[0]", "empty");
  ExpectInvalid(Completion({{"prompt", {1, "a"}}}), "prompt");
  ExpectInvalid(Completion({{"prompt", {"a", 1}}}), "prompt");
  ExpectInvalid(Completion({{"prompt", {1, -2}}}), "prompt");
  ExpectInvalid(Completion({{"prompt", {1, 2.5}}}), "prompt", "integers");
  ExpectInvalid(Completion({{"prompt", json::array({true})}}), "prompt");
  ExpectInvalid(Completion({{"prompt", nullptr}}), "prompt", "required");
  json body = CompletionBody();
  body.erase("prompt");
  ExpectInvalid(ParseCompletionRequest(body.dump()), "prompt", "required");
}

TEST_CASE("openai_request: echo keeps the prompt text and refuses token ids", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Completion({{"echo", true}});
  REQUIRE(request.ok());
  CHECK(request->echo);
  CHECK(request->echo_texts == std::vector<std::string>{"Once upon a time"});
  request = Completion({{"echo", false}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->echo);
  CHECK(request->echo_texts.empty());
  ExpectInvalid(Completion({{"echo", true}, {"prompt", {1, 2}}}), "echo", "not supported");
}

TEST_CASE("openai_request: logprobs settings per endpoint", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Chat({{"logprobs", true}, {"top_logprobs", 5}});
  REQUIRE(request.ok());
  CHECK(request->logprobs);
  CHECK(request->top_logprobs == 5);
  CHECK(request->generate.sampling().logprobs());
  CHECK(request->generate.sampling().top_logprobs() == 5);
  request = Chat({{"logprobs", false}, {"top_logprobs", 0}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->generate.sampling().logprobs());
  ExpectInvalid(Chat({{"top_logprobs", 2}}), "top_logprobs", "logprobs");
  ExpectInvalid(Chat({{"logprobs", false}, {"top_logprobs", 2}}), "top_logprobs");

  request = Completion({{"logprobs", 3}});
  REQUIRE(request.ok());
  CHECK(request->logprobs);
  CHECK(request->top_logprobs == 3);
  CHECK(request->generate.sampling().logprobs());
  CHECK(request->generate.sampling().top_logprobs() == 3);
  request = Completion({{"logprobs", 0}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().logprobs());
  CHECK(request->generate.sampling().top_logprobs() == 0);
  request = Completion({{"logprobs", nullptr}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->logprobs);
  ExpectInvalid(Completion({{"logprobs", 6}}), "logprobs", "between 0 and 5");
  ExpectInvalid(Completion({{"logprobs", -1}}), "logprobs");
}

TEST_CASE("openai_request: echo with logprobs and vLLM's prompt_logprobs ask the worker for prompt logprobs",
          "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Completion({{"echo", true}, {"logprobs", 2}, {"prompt", {"a", "b"}}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->prompt_logprobs.has_value());  // shown in the logprobs arrays, not vLLM's field
  for (const v1::GenerateRequest* generate : {&request->generate, &request->further_prompts[0]}) {
    REQUIRE(generate->sampling().has_prompt_logprobs());
    CHECK(generate->sampling().prompt_logprobs() == 2);
  }
  // Echo without logprobs, or logprobs without echo, needs none.
  CHECK_FALSE(Completion({{"echo", true}})->generate.sampling().has_prompt_logprobs());
  CHECK_FALSE(Completion({{"logprobs", 2}})->generate.sampling().has_prompt_logprobs());

  // vLLM's parameter, for completions and chat; the worker computes the larger of the two counts.
  request = Completion({{"echo", true}, {"logprobs", 1}, {"prompt_logprobs", 4}});
  REQUIRE(request.ok());
  CHECK(request->prompt_logprobs == 4u);
  CHECK(request->generate.sampling().prompt_logprobs() == 4);
  request = Chat({{"prompt_logprobs", 0}});
  REQUIRE(request.ok());
  CHECK(request->prompt_logprobs == 0u);
  REQUIRE(request->generate.sampling().has_prompt_logprobs());
  CHECK(request->generate.sampling().prompt_logprobs() == 0);

  ExpectInvalid(Completion({{"prompt_logprobs", 21}}), "prompt_logprobs", "between 0 and 20");
  ExpectInvalid(Completion({{"prompt_logprobs", -1}}), "prompt_logprobs");
  ExpectInvalid(Chat({{"prompt_logprobs", "2"}}), "prompt_logprobs");
  ExpectInvalid(Completion({{"prompt_logprobs", 1}, {"stream", true}}), "prompt_logprobs", "stream");
  CHECK(Completion({{"prompt_logprobs", nullptr}, {"stream", true}}).ok());
}

TEST_CASE("openai_request: unknown fields are ignored and null reads as absent", "[unit][openai]") {
  const absl::StatusOr<OpenAiRequest> request = Chat({{"frobnicate", {{"x", 1}}},
                                                      {"temperature", nullptr},
                                                      {"max_tokens", nullptr},
                                                      {"stop", nullptr},
                                                      {"user", nullptr},
                                                      {"parallel_tool_calls", false},
                                                      {"metadata", {{"k", "v"}}}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->generate.sampling().has_temperature());
  CHECK_FALSE(request->generate.sampling().has_max_tokens());
}

TEST_CASE("openai_request: parameters with unimplemented meaning are refused", "[unit][openai]") {
  // logit_bias and response_format are implemented now (structured_output_request_test.cc).
  const absl::StatusOr<OpenAiRequest> bias = Chat({{"logit_bias", {{"50256", -100}}}});
  REQUIRE(bias.ok());
  CHECK(bias->generate.sampling().logit_bias().at(50256) == -100);
  const absl::StatusOr<OpenAiRequest> format = Chat({{"response_format", {{"type", "json_object"}}}});
  REQUIRE(format.ok());
  CHECK(format->generate.sampling().constraint().json_object());
  ExpectInvalid(Chat({{"response_format", {{"type", "xml"}}}}), "response_format.type", "\"xml\" is not supported");
  CHECK(Chat({{"response_format", {{"type", "text"}}}}).ok());
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  CHECK(Chat({{"tools", tools}, {"tool_choice", "none"}}).ok());
  CHECK(Chat({{"tools", json::array()}}).ok());
  ExpectInvalid(Completion({{"suffix", "end"}}), "suffix", "not supported");
  CHECK(Completion({{"suffix", ""}}).ok());
  CHECK(Completion({{"best_of", 2}, {"n", 2}}).ok());
  CHECK(Completion({{"best_of", 1}}).ok());
}

TEST_CASE("openai_request: best_of generates more choices with logprobs and keeps n", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Completion({{"prompt", {"a", "b"}}, {"n", 2}, {"best_of", 5}});
  REQUIRE(request.ok());
  CHECK(request->best_of_n == 2);
  CHECK(request->num_choices() == 5);
  CHECK(request->total_choices() == 10);
  for (const v1::GenerateRequest* generate : {&request->generate, &request->further_prompts[0]}) {
    CHECK(generate->sampling().n() == 5);
    CHECK(generate->sampling().logprobs());  // to rank the choices, even when the client asked for none
    CHECK(generate->sampling().top_logprobs() == 0);
  }
  CHECK_FALSE(request->logprobs);  // ... which the answer then leaves out

  request = Completion({{"n", 2}, {"best_of", 2}});
  REQUIRE(request.ok());
  CHECK(request->best_of_n == 0);
  CHECK_FALSE(request->generate.sampling().logprobs());

  ExpectInvalid(Completion({{"n", 3}, {"best_of", 2}}), "best_of", "at least 'n'");
  ExpectInvalid(Chat({{"best_of", 3}}), "best_of", "/v1/completions");
  CHECK(Chat({{"best_of", 2}, {"n", 2}}).ok());
  ExpectInvalid(Completion({{"best_of", 3}, {"stream", true}}), "best_of", "streaming");
  ExpectInvalid(Completion({{"best_of", 17}}), "best_of");
  ExpectInvalid(Completion({{"prompt", std::vector<std::string>(100, "x")}, {"best_of", 16}}), "best_of", "1024");
}

TEST_CASE("openai_request: a prompt list's every generation gets the request's logprobs", "[unit][openai]") {
  absl::StatusOr<OpenAiRequest> request = Completion({{"prompt", {"a", "b", "c"}}, {"logprobs", 3}});
  REQUIRE(request.ok());
  for (const v1::GenerateRequest& further : request->further_prompts) {
    CHECK(further.sampling().logprobs());
    CHECK(further.sampling().top_logprobs() == 3);
  }
}

}  // namespace
}  // namespace llmc::gateway

namespace llmc::gateway {
namespace {

TEST_CASE("openai_request: tools, tool calls and template fields reach the worker in the client's key order",
          "[unit][openai]") {
  // Written by hand so the keys are out of alphabetical order, as a client may send them.
  const std::string body = R"({"model":"qwen","messages":[
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"sunny","extra":"dropped"}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","required":["city"],
      "properties":{"city":{"type":"string"}}}}}],
    "tool_choice":"auto","chat_template":"{{ messages | length }}","chat_template_kwargs":{"z":1,"a":2}})";
  const absl::StatusOr<OpenAiRequest> request = ParseChatCompletionRequest(body);
  REQUIRE(request.ok());
  const v1::ChatInput& chat = request->generate.chat();
  CHECK(chat.tools_json() ==
        R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","required":["city"],)"
        R"("properties":{"city":{"type":"string"}}}}}])");
  CHECK(
      chat.messages_json() ==
      R"([{"role":"user","content":"weather?"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function",)"
      R"("function":{"name":"get_weather","arguments":{"city":"Oslo"}}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"sunny"}])");
  CHECK(chat.chat_template() == "{{ messages | length }}");
  // Arguments that are not a JSON object stay a string; an empty list of calls is dropped.
  const absl::StatusOr<OpenAiRequest> odd = ParseChatCompletionRequest(
      R"({"model":"m","messages":[{"role":"assistant","content":"x","tool_calls":[]},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"[1"}},)"
      R"({"function":{"name":"g","arguments":""}}]}]})");
  REQUIRE(odd.ok());
  CHECK(odd->generate.chat().messages_json() ==
        R"([{"role":"assistant","content":"x"},{"role":"assistant","content":"","tool_calls":[)"
        R"({"function":{"name":"f","arguments":"[1"}},{"function":{"name":"g","arguments":{}}}]}])");
  CHECK_FALSE(request->generate.has_add_special_tokens());
  const absl::StatusOr<OpenAiRequest> with_bos = ParseChatCompletionRequest(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"add_special_tokens":true})");
  REQUIRE(with_bos.ok());
  CHECK(with_bos->generate.add_special_tokens());
  CHECK(chat.chat_template_kwargs_json() == R"({"z":1,"a":2})");
  // OpenAI's reasoning_effort reaches the template (GPT-OSS's reads it; "minimal" turns Qwen3's thinking off);
  // the client's own chat_template_kwargs win.
  const auto kwargs_of = [](const std::string& fields) {
    const absl::StatusOr<OpenAiRequest> parsed =
        ParseChatCompletionRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}],)" + fields + "}");
    REQUIRE(parsed.ok());
    return parsed->generate.chat().chat_template_kwargs_json();
  };
  CHECK(kwargs_of(R"("reasoning_effort":"high")") == R"({"reasoning_effort":"high"})");
  CHECK(kwargs_of(R"("reasoning_effort":"minimal")") == R"({"enable_thinking":false})");
  CHECK(kwargs_of(R"("reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"medium","b":1})") ==
        R"({"reasoning_effort":"medium","b":1})");

  const auto invalid = [](const std::string& body, const std::string& param) {
    const absl::StatusOr<OpenAiRequest> parsed = ParseChatCompletionRequest(body);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(ParameterOf(parsed.status()) + " " + std::string(parsed.status().message()), Catch::Contains(param));
  };
  const std::string user = R"("messages":[{"role":"user","content":"x"}])";
  invalid(R"({"model":"m",)" + user + R"(,"tools":[{"type":"function"}]})", "tools[0].function");
  invalid(R"({"model":"m",)" + user + R"(,"chat_template_kwargs":[1]})", "chat_template_kwargs");
  invalid(R"({"model":"m",)" + user + R"(,"chat_template":5})", "chat_template");
  invalid(R"({"model":"m",)" + user + R"(,"reasoning_effort":"max"})", "reasoning_effort");
  invalid(R"({"model":"m",)" + user + R"(,"reasoning_effort":2})", "reasoning_effort");
  invalid(R"({"model":"m",)" + user + R"(,"add_special_tokens":"yes"})", "add_special_tokens");
  invalid(R"({"model":"m",)" + user + R"(,"tool_choice":"required"})", "needs at least one function");
  // Nesting and key counts are bounded before anything copies or re-parses the body.
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  invalid(R"({"model":"m",)" + user + R"(,"chat_template_kwargs":{"a":)" + deep + "}}", "deeper than 64");
  std::string many_keys = "{";
  for (int i = 0; i < 10001; ++i) many_keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  invalid(R"({"model":"m",)" + user + R"(,"chat_template_kwargs":)" + many_keys + "}}", "more than 10000 keys");
  // Brackets inside strings do not count.
  CHECK(ParseChatCompletionRequest(R"({"model":"m","messages":[{"role":"user","content":")" + deep + R"("}]})").ok());
  invalid(R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{}}]}]})",
          "messages[0].tool_calls[0].function.name");
  invalid(R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":3}}]}]})",
          "arguments");
}

TEST_CASE("openai_request: tools, tool_choice and reasoning fields reach the worker", "[unit][openai]") {
  const json weather = {{"type", "function"},
                        {"function",
                         {{"name", "get_weather"},
                          {"strict", true},
                          {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
  const json search = {{"type", "web_search_preview"}};  // not a function: left out, not refused
  absl::StatusOr<OpenAiRequest> request =
      Chat({{"tools", json::array({search, weather})}, {"tool_choice", "required"}, {"parallel_tool_calls", false}});
  REQUIRE(request.ok());
  const v1::ChatInput& chat = request->generate.chat();
  CHECK(chat.tool_choice() == v1::TOOL_CHOICE_REQUIRED);
  CHECK(chat.has_parallel_tool_calls());
  CHECK_FALSE(chat.parallel_tool_calls());
  const json forwarded = json::parse(chat.tools_json());
  REQUIRE(forwarded.size() == 1);
  CHECK(forwarded[0]["function"]["name"] == "get_weather");

  request = Chat({{"tools", json::array({weather})},
                  {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  REQUIRE(request.ok());
  CHECK(request->generate.chat().tool_choice() == v1::TOOL_CHOICE_NAMED);
  CHECK(request->generate.chat().tool_choice_name() == "get_weather");
  ExpectInvalid(Chat({{"tools", json::array({weather})},
                      {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
                "tool_choice.function.name", "not among the tools");
  ExpectInvalid(Chat({{"tools", json::array({weather})}, {"tool_choice", "always"}}), "tool_choice",
                "unknown tool_choice");
  ExpectInvalid(Chat({{"tools", json::array({weather})}, {"tool_choice", 3}}), "tool_choice", "a string or an object");
  ExpectInvalid(Chat({{"tools", json::array({search})}, {"tool_choice", "required"}}), "tool_choice",
                "at least one function");
  const json bad_parameters = {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}};
  ExpectInvalid(Chat({{"tools", json::array({bad_parameters})}}), "tools[0].function.parameters", "a JSON schema");
  ExpectInvalid(Chat({{"parallel_tool_calls", "no"}}), "parallel_tool_calls", "");

  request = Chat({{"include_reasoning", false}, {"separate_reasoning", false}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->include_reasoning);
  CHECK(request->generate.chat().has_separate_reasoning());
  CHECK_FALSE(request->generate.chat().separate_reasoning());
}

TEST_CASE("openai_request: an assistant turn's reasoning reaches the template as reasoning_content", "[unit][openai]") {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"q"},)"
      R"({"role":"assistant","content":"a","reasoning":"because"},{"role":"user","content":"q2"}]})";
  absl::StatusOr<OpenAiRequest> request = ParseChatCompletionRequest(body);
  REQUIRE(request.ok());
  const json messages = json::parse(request->generate.chat().messages_json());
  CHECK(messages[1]["reasoning_content"] == "because");
}

TEST_CASE("openai_request: JSON inside a tool call's arguments string has the body's limits", "[unit][openai][tools]") {
  const auto with_arguments = [](const std::string& arguments) {
    const json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}};
    return Chat({{"messages", json::array({{{"role", "user"}, {"content", "q"}},
                                           {{"role", "assistant"}, {"tool_calls", json::array({call})}}})}});
  };
  ExpectInvalid(with_arguments(std::string(100, '[') + std::string(100, ']')),
                "messages[1].tool_calls[0].function.arguments", "deeper than 64");
  std::string many = "{";
  for (int i = 0; i < 10001; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  ExpectInvalid(with_arguments(many + "}"), "messages[1].tool_calls[0].function.arguments", "more than 10000 keys");
  const absl::StatusOr<OpenAiRequest> fine = with_arguments(R"({"a":[1,2]})");
  REQUIRE(fine.ok());
  CHECK(json::parse(fine->generate.chat().messages_json())[1]["tool_calls"][0]["function"]["arguments"] ==
        json{{"a", {1, 2}}});
  // JSON's parser would stop at a NUL byte and read {"a":1}: a text holding one is not JSON, so it stays the
  // client's string (found by fuzz/json_in_strings_fuzzer.cc, with past-the-limits brackets after the NUL).
  const std::string with_nul("{\"a\":1}\0{\"b\":2}", 15);
  const absl::StatusOr<OpenAiRequest> not_json = with_arguments(with_nul);
  REQUIRE(not_json.ok());
  CHECK(json::parse(not_json->generate.chat().messages_json())[1]["tool_calls"][0]["function"]["arguments"] ==
        with_nul);
  ExpectInvalid(with_arguments(std::string("{\"a\":1}\0", 8) + std::string(100, '[')),
                "messages[1].tool_calls[0].function.arguments", "deeper than 64");
}

TEST_CASE("openai_request: a NUL byte after the JSON body is a 400, not ignored", "[unit][openai]") {
  ExpectInvalid(ParseChatCompletionRequest(std::string(R"({"model":"m","messages":[{"role":"user","content":"a"}]})") +
                                           '\0' + "junk"),
                "", "NUL byte at offset 56");
  // A NUL inside a string is spelled \u0000 and is fine.
  const absl::StatusOr<OpenAiRequest> escaped = ParseCompletionRequest(R"({"model":"m","prompt":"a\u0000b"})");
  REQUIRE(escaped.ok());
  CHECK(escaped->generate.prompt() == std::string("a\0b", 3));
}

}  // namespace
}  // namespace llmc::gateway
