#include "gateway/openai/responses_request.h"

#include <string>

#include "gateway/openai/openai_error.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A minimal valid body, with `extra` fields set over it.
json Body(const json& extra = json::object()) {
  json body = {{"model", "qwen"}, {"input", "hi"}};
  for (const auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

ResponsesTranslation Translate(const json& extra = json::object()) {
  absl::StatusOr<ResponsesTranslation> translation = TranslateResponsesBody(Body(extra).dump());
  INFO(translation.status().ToString());
  REQUIRE(translation.ok());
  return *std::move(translation);
}

ResponsesRequest Parse(const json& extra = json::object()) {
  absl::StatusOr<ResponsesRequest> request = ParseResponsesRequest(Body(extra).dump());
  INFO(request.status().ToString());
  REQUIRE(request.ok());
  return *std::move(request);
}

// Key order aside: ordered_json compares in order.
json Plain(const ordered_json& value) { return json::parse(value.dump()); }

// A 400 naming `param`, its message containing `fragment`.
void ExpectInvalid(const absl::Status& status, const std::string& param, const std::string& fragment = "") {
  INFO(status.ToString());
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParameterOf(status) == param);
  CHECK(HttpStatusOf(status) == 400);
  if (!fragment.empty()) CHECK_THAT(std::string(status.message()), Catch::Contains(fragment));
}

// Checks both the translation and the full parse, which must refuse the same way.
void ExpectRefused(const json& extra, const std::string& param, const std::string& fragment = "") {
  ExpectInvalid(ParseResponsesRequest(Body(extra).dump()).status(), param, fragment);
}

TEST_CASE("responses_request: a string input is one user message", "[unit][responses]") {
  const ResponsesTranslation translation = Translate();
  CHECK(Plain(translation.chat_body) ==
        json{{"model", "qwen"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}});
  CHECK(translation.params.message_sources == std::vector<std::string>{"input"});

  const ResponsesRequest request = Parse({{"temperature", 0.5}, {"top_p", 0.9}, {"user", "u1"}});
  CHECK(request.chat.kind == OpenAiKind::kChat);
  CHECK(request.chat.model == "qwen");
  CHECK(request.chat.num_choices() == 1);
  CHECK_FALSE(request.chat.stream);
  CHECK(request.chat.generate.sampling().temperature() == Approx(0.5));
  CHECK(request.chat.generate.sampling().top_p() == Approx(0.9));
  CHECK(request.chat.generate.user() == "u1");
  CHECK(json::parse(request.chat.generate.chat().messages_json()) ==
        json::array({{{"role", "user"}, {"content", "hi"}}}));
}

TEST_CASE("responses_request: instructions come first as a system message", "[unit][responses]") {
  const ResponsesTranslation translation = Translate({{"instructions", "Be brief."}});
  CHECK(Plain(translation.chat_body["messages"]) ==
        json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}}));
  CHECK(translation.params.message_sources == std::vector<std::string>{"instructions", "input"});
  CHECK(translation.echo["instructions"] == "Be brief.");
  // An empty string adds no message.
  CHECK(Translate({{"instructions", ""}}).chat_body["messages"].size() == 1);
  ExpectRefused({{"instructions", 3}}, "instructions", "must be a string");
}

TEST_CASE("responses_request: message items, with or without a type, and their content parts", "[unit][responses]") {
  const json input = json::array({
      {{"role", "developer"}, {"content", "Rules."}},
      {{"type", "message"},
       {"role", "user"},
       {"content",
        json::array({{{"type", "input_text"}, {"text", "one"}}, {{"type", "input_text"}, {"text", "two"}}})}},
      {{"type", "message"},
       {"role", "assistant"},
       {"id", "msg_1"},
       {"status", "completed"},
       {"content", json::array({{{"type", "output_text"}, {"text", "Hel"}, {"annotations", json::array()}},
                                {{"type", "output_text"}, {"text", "lo"}}})}},
      {{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "single"}}})}},
  });
  const ResponsesTranslation translation = Translate({{"input", input}});
  CHECK(Plain(translation.chat_body["messages"]) ==
        json::array(
            {{{"role", "developer"}, {"content", "Rules."}},
             {{"role", "user"},
              {"content", json::array({{{"type", "text"}, {"text", "one"}}, {{"type", "text"}, {"text", "two"}}})}},
             {{"role", "assistant"}, {"content", "Hello"}},
             {{"role", "user"}, {"content", "single"}}}));
  CHECK(translation.params.message_sources == std::vector<std::string>{"input[0]", "input[1]", "input[2]", "input[3]"});
  // The chat parser then reads developer as system.
  const json messages = json::parse(Parse({{"input", input}}).chat.generate.chat().messages_json());
  CHECK(messages[0]["role"] == "system");
}

TEST_CASE("responses_request: function calls join one assistant message, outputs become tool messages",
          "[unit][responses]") {
  const json input = json::array({
      {{"role", "user"}, {"content", "Weather in Paris and Rome?"}},
      {{"type", "reasoning"},
       {"id", "rs_1"},
       {"summary", json::array()},
       {"content", json::array({{{"type", "reasoning_text"}, {"text", "Two cities: two calls."}}})}},
      {{"type", "function_call"},
       {"id", "fc_1"},
       {"call_id", "call_a"},
       {"name", "get_weather"},
       {"arguments", R"({"city":"Paris"})"},
       {"status", "completed"}},
      {{"type", "function_call"}, {"call_id", "call_b"}, {"name", "get_weather"}, {"arguments", R"({"city":"Rome"})"}},
      {{"type", "function_call_output"}, {"call_id", "call_a"}, {"output", "18C"}},
      {{"type", "function_call_output"},
       {"call_id", "call_b"},
       {"output", json::array({{{"type", "input_text"}, {"text", "21C"}}})}},
      {{"role", "assistant"}, {"content", "Paris 18C, Rome 21C."}},
      {{"type", "function_call"}, {"call_id", "call_c"}, {"name", "log"}, {"arguments", "{}"}},
      {{"role", "user"}, {"content", "Thanks"}},
  });
  const ResponsesTranslation translation = Translate({{"input", input}});
  const json call_a = {{"id", "call_a"},
                       {"type", "function"},
                       {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}};
  const json call_b = {{"id", "call_b"},
                       {"type", "function"},
                       {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Rome"})"}}}};
  const json call_c = {{"id", "call_c"}, {"type", "function"}, {"function", {{"name", "log"}, {"arguments", "{}"}}}};
  CHECK(Plain(translation.chat_body["messages"]) ==
        json::array({
            {{"role", "user"}, {"content", "Weather in Paris and Rome?"}},
            {{"role", "assistant"},
             {"content", ""},
             {"reasoning_content", "Two cities: two calls."},
             {"tool_calls", json::array({call_a, call_b})}},
            {{"role", "tool"}, {"tool_call_id", "call_a"}, {"content", "18C"}},
            {{"role", "tool"}, {"tool_call_id", "call_b"}, {"content", "21C"}},
            // A call right after the assistant's text joins that message.
            {{"role", "assistant"}, {"content", "Paris 18C, Rome 21C."}, {"tool_calls", json::array({call_c})}},
            {{"role", "user"}, {"content", "Thanks"}},
        }));
  CHECK(translation.params.message_sources ==
        std::vector<std::string>{"input[0]", "input[2]", "input[4]", "input[5]", "input[6]", "input[8]"});
  // The chat parser accepts the result; templates see the arguments as objects.
  const json messages = json::parse(Parse({{"input", input}}).chat.generate.chat().messages_json());
  CHECK(messages[1]["tool_calls"][0]["function"]["arguments"] == json{{"city", "Paris"}});
}

TEST_CASE("responses_request: reasoning items reach only the assistant message right after them", "[unit][responses]") {
  const json reasoning = {{"type", "reasoning"},
                          {"summary", json::array({{{"type", "summary_text"}, {"text", "sum"}}})},
                          {"content", json::array({{{"type", "reasoning_text"}, {"text", "think"}}})}};
  const json plain = Plain(Translate({{"input", json::array({{{"role", "user"}, {"content", "q"}},
                                                             reasoning,
                                                             {{"role", "assistant"}, {"content", "a"}},
                                                             reasoning,
                                                             {{"role", "user"}, {"content", "q2"}}})}})
                               .chat_body["messages"]);
  CHECK(plain == json::array({{{"role", "user"}, {"content", "q"}},
                              {{"role", "assistant"}, {"content", "a"}, {"reasoning_content", "think"}},
                              {{"role", "user"}, {"content", "q2"}}}));
  // Only a summary (no reasoning text): nothing to pass on.
  const json summary_only = {{"type", "reasoning"}, {"summary", json::array()}, {"encrypted_content", "x"}};
  CHECK(Plain(Translate({{"input", json::array({summary_only, {{"role", "assistant"}, {"content", "a"}}})}})
                  .chat_body["messages"]) == json::array({{{"role", "assistant"}, {"content", "a"}}}));
}

TEST_CASE("responses_request: function tools are flattened, other tool types are left out", "[unit][responses]") {
  // A raw body: the client's key order in the schema must reach the chat body.
  const std::string body = R"({"model":"qwen","input":"hi","tools":[
      {"type":"web_search_preview"},
      {"type":"function","name":"get_weather","description":"Weather","strict":true,
       "parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}}},
      {"type":"file_search","vector_store_ids":["vs_1"]},
      {"type":"function","name":"noop"}]})";
  absl::StatusOr<ResponsesTranslation> translation = TranslateResponsesBody(body);
  REQUIRE(translation.ok());
  const ordered_json& tools = translation->chat_body["tools"];
  REQUIRE(tools.size() == 2);
  CHECK(tools[0].dump() ==
        R"({"type":"function","function":{"name":"get_weather","description":"Weather","strict":true,)"
        R"("parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}}}})");
  CHECK(tools[1].dump() == R"({"type":"function","function":{"name":"noop"}})");
  CHECK(translation->params.tool_sources == std::vector<size_t>{1, 3});
  // The answer echoes the function tools in the Responses shape.
  const ordered_json& echoed = translation->echo["tools"];
  REQUIRE(echoed.size() == 2);
  CHECK(echoed[0]["name"] == "get_weather");
  CHECK(echoed[0]["strict"] == true);
  CHECK(echoed[1]["parameters"].is_null());
  CHECK(echoed[1]["strict"] == false);

  absl::StatusOr<ResponsesRequest> request = ParseResponsesRequest(body);
  REQUIRE(request.ok());
  CHECK(json::parse(request->chat.generate.chat().tools_json()).size() == 2);

  // The Chat Completions shape is taken too, for tools and tool_choice.
  const json chat_tool = {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}};
  const ResponsesTranslation chat_shaped = Translate(
      {{"tools", json::array({chat_tool})}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}});
  CHECK(Plain(chat_shaped.chat_body["tools"]) == json::array({chat_tool}));
  CHECK(chat_shaped.echo["tools"][0]["name"] == "f");
  CHECK(Plain(chat_shaped.echo["tools"][0]["parameters"]) == json{{"type", "object"}});
  CHECK(Plain(chat_shaped.chat_body["tool_choice"]) == json{{"type", "function"}, {"function", {{"name", "f"}}}});

  ExpectRefused({{"tools", json::array({{{"type", "function"}, {"name", "ok"}}, {{"type", "function"}}})}},
                "tools[1].name", "is required");
  ExpectRefused({{"tools", json::array({{{"name", "no_type"}}})}}, "tools[0].type", "is required");
  ExpectRefused({{"tools", json::array({{{"type", "function"}, {"name", "f"}, {"parameters", "x"}}})}},
                "tools[0].parameters", "must be an object");
  ExpectRefused({{"tools", {{"type", "function"}}}}, "tools", "must be an array");
  ExpectRefused({{"tools", json::array({"f"})}}, "tools[0]", "must be an object");
}

TEST_CASE("responses_request: tool_choice forms", "[unit][responses]") {
  const json tools = json::array({{{"type", "function"}, {"name", "get_weather"}}});
  for (const char* choice : {"auto", "none", "required"}) {
    const ResponsesTranslation translation = Translate({{"tools", tools}, {"tool_choice", choice}});
    CHECK(translation.chat_body["tool_choice"] == choice);
    CHECK(translation.echo["tool_choice"] == choice);
  }
  const ResponsesTranslation named =
      Translate({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}});
  CHECK(Plain(named.chat_body["tool_choice"]) == json{{"type", "function"}, {"function", {{"name", "get_weather"}}}});
  CHECK(Plain(named.echo["tool_choice"]) == json{{"type", "function"}, {"name", "get_weather"}});
  CHECK(Translate().echo["tool_choice"] == "auto");
  CHECK_FALSE(Translate().chat_body.contains("tool_choice"));

  ExpectRefused({{"tools", tools}, {"tool_choice", "sometimes"}}, "tool_choice", "unknown tool_choice");
  ExpectRefused({{"tools", tools}, {"tool_choice", {{"type", "web_search_preview"}}}}, "tool_choice.type",
                "no built-in tools");
  ExpectRefused({{"tools", tools}, {"tool_choice", {{"type", "function"}}}}, "tool_choice.name", "is required");
  ExpectRefused({{"tools", tools}, {"tool_choice", 1}}, "tool_choice", "a string or an object");
  // The chat parser's refusal of a function that is not among the tools names the Responses field.
  ExpectRefused({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"name", "other"}}}}, "tool_choice.name",
                "not among the tools");

  // parallel_tool_calls passes through, and is echoed (true by default).
  const ResponsesTranslation serial = Translate({{"tools", tools}, {"parallel_tool_calls", false}});
  CHECK(serial.chat_body["parallel_tool_calls"] == false);
  CHECK(serial.echo["parallel_tool_calls"] == false);
  CHECK(Translate().echo["parallel_tool_calls"] == true);
  ExpectRefused({{"parallel_tool_calls", "yes"}}, "parallel_tool_calls", "must be a boolean");
}

TEST_CASE("responses_request: text.format becomes response_format", "[unit][responses]") {
  const json schema = {{"type", "object"},
                       {"properties", {{"answer", {{"type", "string"}}}}},
                       {"required", json::array({"answer"})},
                       {"additionalProperties", false}};
  const json format = {{"type", "json_schema"}, {"name", "Answer"}, {"schema", schema}, {"strict", true}};
  const ResponsesTranslation translation = Translate({{"text", {{"format", format}}}});
  CHECK(Plain(translation.chat_body["response_format"]) ==
        json{{"type", "json_schema"}, {"json_schema", {{"name", "Answer"}, {"schema", schema}, {"strict", true}}}});
  CHECK(Plain(translation.echo["text"]["format"]) == format);

  const ResponsesRequest request = Parse({{"text", {{"format", format}}}});
  const v1::OutputConstraint& constraint = request.chat.generate.sampling().constraint();
  CHECK(json::parse(constraint.json_schema()) == schema);
  CHECK(constraint.strict());
  CHECK(constraint.source() == "response_format");

  CHECK(Plain(Translate({{"text", {{"format", {{"type", "json_object"}}}}}}).chat_body["response_format"]) ==
        json{{"type", "json_object"}});
  CHECK_FALSE(Translate({{"text", {{"format", {{"type", "text"}}}}}}).chat_body.contains("response_format"));
  CHECK(Plain(Translate().echo["text"]) == json{{"format", {{"type", "text"}}}, {"verbosity", "medium"}});

  ExpectRefused({{"text", {{"format", {{"type", "yaml"}}}}}}, "text.format.type", "not supported");
  ExpectRefused({{"text", {{"format", "json"}}}}, "text.format", "must be an object");
  ExpectRefused({{"text", "json"}}, "text", "must be an object");
  // What the chat parser refuses is named as the client wrote it.
  ExpectRefused({{"text", {{"format", {{"type", "json_schema"}, {"schema", schema}}}}}}, "text.format.name",
                "'text.format.name' is required");
  ExpectRefused({{"text", {{"format", {{"type", "json_schema"}, {"name", "A"}}}}}}, "text.format.schema");
  ExpectRefused({{"text", {{"format", {{"type", "json_schema"}, {"name", "A"}, {"schema", schema}, {"x", 1}}}}}},
                "text.format.x");
  // Verbosity: only "medium", which asks for nothing.
  CHECK(Translate({{"text", {{"verbosity", "medium"}}}}).chat_body.size() == 2);
  ExpectRefused({{"text", {{"verbosity", "low"}}}}, "text.verbosity", "not supported");
  ExpectRefused({{"text", {{"verbosity", "loud"}}}}, "text.verbosity", "must be");
}

TEST_CASE("responses_request: max_output_tokens is the chat request's max_tokens", "[unit][responses]") {
  const ResponsesTranslation translation = Translate({{"max_output_tokens", 64}});
  CHECK(translation.chat_body["max_completion_tokens"] == 64);
  CHECK(translation.echo["max_output_tokens"] == 64);
  CHECK(Parse({{"max_output_tokens", 64}}).chat.generate.sampling().max_tokens() == 64);
  CHECK(Translate().echo["max_output_tokens"].is_null());
  ExpectRefused({{"max_output_tokens", 0}}, "max_output_tokens", "'max_output_tokens' must be between 1");
  ExpectRefused({{"max_output_tokens", "many"}}, "max_output_tokens", "'max_output_tokens' must be an integer");
}

TEST_CASE("responses_request: reasoning.effort reaches the chat template", "[unit][responses]") {
  for (const char* off : {"none", "minimal"}) {
    CHECK(Plain(Translate({{"reasoning", {{"effort", off}}}}).chat_body["chat_template_kwargs"]) ==
          json{{"enable_thinking", false}});
  }
  CHECK(
      Plain(Translate({{"reasoning", {{"effort", "high"}, {"summary", "auto"}}}}).chat_body["chat_template_kwargs"]) ==
      json{{"reasoning_effort", "high"}});
  CHECK(Plain(Translate({{"reasoning", {{"effort", "xhigh"}}}}).chat_body["chat_template_kwargs"]) ==
        json{{"reasoning_effort", "high"}});
  CHECK_FALSE(Translate({{"reasoning", {{"summary", "detailed"}}}}).chat_body.contains("chat_template_kwargs"));
  CHECK(Plain(Translate({{"reasoning", {{"effort", "low"}, {"summary", "concise"}}}}).echo["reasoning"]) ==
        json{{"effort", "low"}, {"summary", "concise"}});
  CHECK(Plain(Translate().echo["reasoning"]) == json{{"effort", nullptr}, {"summary", nullptr}});
  // The client's own chat_template_kwargs win.
  CHECK(Plain(Translate({{"reasoning", {{"effort", "none"}}},
                         {"chat_template_kwargs", {{"enable_thinking", true}, {"x", 1}}}})
                  .chat_body["chat_template_kwargs"]) == json{{"enable_thinking", true}, {"x", 1}});
  const ResponsesRequest request = Parse({{"reasoning", {{"effort", "none"}}}});
  CHECK(json::parse(request.chat.generate.chat().chat_template_kwargs_json()) == json{{"enable_thinking", false}});

  ExpectRefused({{"reasoning", {{"effort", "max"}}}}, "reasoning.effort", "must be none, minimal");
  ExpectRefused({{"reasoning", {{"summary", "long"}}}}, "reasoning.summary", "must be auto");
  ExpectRefused({{"reasoning", true}}, "reasoning", "must be an object");
}

TEST_CASE("responses_request: stateful fields are refused by name", "[unit][responses]") {
  ExpectRefused({{"store", true}}, "store", "keeps no responses");
  ExpectRefused({{"previous_response_id", "resp_123"}}, "previous_response_id", "keeps no responses");
  ExpectRefused({{"conversation", "conv_1"}}, "conversation", "keeps no conversations");
  ExpectRefused({{"background", true}}, "background", "not supported");
  ExpectRefused({{"prompt", {{"id", "pmpt_1"}}}}, "prompt", "not supported");
  ExpectRefused({{"truncation", "auto"}}, "truncation", "never drops input items");
  ExpectRefused({{"truncation", "sometimes"}}, "truncation", "must be 'auto' or 'disabled'");
  ExpectRefused({{"include", json::array({"message.output_text.logprobs"})}}, "include",
                "'message.output_text.logprobs' is not supported");
  ExpectRefused({{"include", "reasoning.encrypted_content"}}, "include", "must be an array");
  ExpectRefused({{"top_logprobs", 5}}, "top_logprobs", "not supported");
  ExpectRefused({{"store", "yes"}}, "store", "must be a boolean");
  ExpectRefused({{"stream_options", {{"include_obfuscation", false}}}}, "stream_options", "only allowed");

  // What asks for nothing passes: store false, background false, nulls, truncation disabled, and the
  // identifiers OpenAI uses for caching and billing.
  const ResponsesTranslation accepted = Translate({{"store", false},
                                                   {"background", false},
                                                   {"previous_response_id", nullptr},
                                                   {"conversation", nullptr},
                                                   {"truncation", "disabled"},
                                                   {"include", json::array({"reasoning.encrypted_content"})},
                                                   {"top_logprobs", 0},
                                                   {"prompt_cache_key", "k"},
                                                   {"safety_identifier", "s"},
                                                   {"service_tier", "auto"},
                                                   {"max_tool_calls", 3},
                                                   {"stream", true},
                                                   {"stream_options", {{"include_obfuscation", false}}}});
  CHECK(accepted.chat_body["stream"] == true);
  CHECK_FALSE(accepted.chat_body.contains("stream_options"));
  CHECK(accepted.echo["store"] == false);
  CHECK(accepted.echo["previous_response_id"].is_null());
  CHECK(accepted.echo["max_tool_calls"] == 3);
  CHECK(Parse({{"stream", true}}).chat.stream);
}

TEST_CASE("responses_request: bad input items are refused naming the item", "[unit][responses]") {
  ExpectRefused({{"input", 5}}, "input", "a string or an array");
  ExpectRefused({{"input", json::array()}}, "input", "at least one item");
  ExpectRefused({{"input", json::array({"hi"})}}, "input[0]", "must be an object");
  ExpectRefused({{"input", json::array({{{"role", "user"}, {"content", "a"}}, {{"content", "b"}}})}}, "input[1].type",
                "needs a 'type'");
  ExpectRefused({{"input", json::array({{{"role", "tool"}, {"content", "a"}}})}}, "input[0].role", "unknown role");
  ExpectRefused({{"input", json::array({{{"role", "user"}}})}}, "input[0].content", "is required");
  ExpectRefused({{"input", json::array({{{"role", "user"}, {"content", 5}}})}}, "input[0].content",
                "a string or an array of content parts");
  ExpectRefused({{"input", json::array({{{"role", "user"},
                                         {"content", json::array({{{"type", "input_text"}, {"text", "a"}},
                                                                  {{"type", "input_image"}, {"image_url", "x"}}})}}})}},
                "input[0].content[1].type", "text only");
  ExpectRefused({{"input", json::array({{{"role", "user"}, {"content", json::array({{{"type", "input_text"}}})}}})}},
                "input[0].content[0].text", "is required");
  ExpectRefused({{"input", json::array({{{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}})}},
                "input[0].call_id", "is required");
  ExpectRefused({{"input", json::array({{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}}})}},
                "input[0].arguments", "is required");
  ExpectRefused({{"input", json::array({{{"type", "function_call_output"}, {"call_id", "c"}}})}}, "input[0].output",
                "is required");
  ExpectRefused({{"input", json::array({{{"type", "function_call_output"}, {"call_id", "c"}, {"output", 1}}})}},
                "input[0].output", "must be a string or an array");
  ExpectRefused({{"input", json::array({{{"type", "item_reference"}, {"id", "msg_1"}}})}}, "input[0].type",
                "stored items");
  ExpectRefused({{"input", json::array({{{"type", "computer_call_output"}}})}}, "input[0].type",
                "'computer_call_output' are not supported");
  ExpectRefused(
      {{"input",
        json::array({{{"type", "reasoning"}, {"content", json::array({{{"type", "summary_text"}, {"text", "x"}}})}}})}},
      "input[0].content[0].type", "must be 'reasoning_text'");
}

TEST_CASE("responses_request: a body without input, or with a bad model, is refused", "[unit][responses]") {
  ExpectInvalid(ParseResponsesRequest(R"({"model":"qwen"})").status(), "input", "'input' is required");
  ExpectInvalid(ParseResponsesRequest(R"({"input":"hi"})").status(), "model");
  ExpectInvalid(ParseResponsesRequest(R"([1])").status(), "", "must be a JSON object");
  ExpectRefused({{"temperature", 5}}, "temperature", "'temperature' must be");
  ExpectRefused({{"top_p", "x"}}, "top_p");
  ExpectRefused({{"stream", "yes"}}, "stream", "must be a boolean");
}

TEST_CASE("responses_request: metadata is checked and echoed", "[unit][responses]") {
  const std::string body = R"({"model":"qwen","input":"hi","metadata":{"z":"1","a":"2"}})";
  absl::StatusOr<ResponsesTranslation> translation = TranslateResponsesBody(body);
  REQUIRE(translation.ok());
  CHECK(translation->echo["metadata"].dump() == R"({"z":"1","a":"2"})");
  CHECK_FALSE(translation->chat_body.contains("metadata"));
  CHECK(Translate().echo["metadata"] == ordered_json::object());

  ExpectRefused({{"metadata", {{"k", 1}}}}, "metadata.k", "must be a string");
  ExpectRefused({{"metadata", "x"}}, "metadata", "must be an object");
  json many = json::object();
  for (int i = 0; i < 17; ++i) many["k" + std::to_string(i)] = "v";
  ExpectRefused({{"metadata", many}}, "metadata", "at most 16 keys");
  ExpectRefused({{"metadata", {{std::string(65, 'k'), "v"}}}}, "metadata", "at most 64 characters");
  ExpectRefused({{"metadata", {{"k", std::string(513, 'v')}}}}, "metadata.k", "at most 512 characters");
}

TEST_CASE("responses_request: llmc sampling extensions pass through", "[unit][responses]") {
  const ResponsesRequest request =
      Parse({{"top_k", 20}, {"min_p", 0.1}, {"seed", 7}, {"stop", json::array({"END"})}, {"repetition_penalty", 1.1}});
  const v1::SamplingParams& sampling = request.chat.generate.sampling();
  CHECK(sampling.top_k() == 20);
  CHECK(sampling.min_p() == Approx(0.1));
  CHECK(sampling.seed() == 7);
  CHECK(sampling.stop_size() == 1);
  CHECK(sampling.repetition_penalty() == Approx(1.1));
  // n is no Responses parameter: it never reaches the chat body.
  CHECK(Parse({{"n", 3}}).chat.num_choices() == 1);
}

TEST_CASE("responses_request: chat parameters are renamed to the Responses fields", "[unit][responses]") {
  ResponsesParamMap params;
  params.message_sources = {"instructions", "input[0]", "input[2]"};
  params.tool_sources = {1, 4};
  CHECK(params.ToResponses("max_completion_tokens") == "max_output_tokens");
  CHECK(params.ToResponses("max_tokens") == "max_output_tokens");
  CHECK(params.ToResponses("messages") == "input");
  CHECK(params.ToResponses("messages[0].content") == "instructions");
  CHECK(params.ToResponses("messages[2].content[1].text") == "input[2].content[1].text");
  CHECK(params.ToResponses("messages[2].tool_calls[0].function.name") == "input[2]");
  CHECK(params.ToResponses("messages[9]") == "input");
  CHECK(params.ToResponses("response_format") == "text.format");
  CHECK(params.ToResponses("response_format.type") == "text.format.type");
  CHECK(params.ToResponses("response_format.json_schema") == "text.format");
  CHECK(params.ToResponses("response_format.json_schema.schema") == "text.format.schema");
  CHECK(params.ToResponses("tools[1].function.parameters") == "tools[4].parameters");
  CHECK(params.ToResponses("tools[0]") == "tools[1]");
  CHECK(params.ToResponses("tool_choice.function.name") == "tool_choice.name");
  CHECK(params.ToResponses("tool_choice") == "tool_choice");
  CHECK(params.ToResponses("temperature") == "temperature");
  CHECK(params.ToResponses("chat_template_kwargs") == "chat_template_kwargs");
  params.kwargs_from_reasoning = true;
  CHECK(params.ToResponses("chat_template_kwargs") == "reasoning.effort");

  // Renaming keeps the error's code and rewrites the name in its message.
  const absl::Status renamed = params.Translate(
      WithErrorCode(InvalidParameter("response_format", "response_format: the schema is too deep"), "bad"));
  ExpectInvalid(renamed, "text.format", "text.format: the schema is too deep");
  CHECK(ErrorCodeOf(renamed) == "bad");
  const absl::Status other = absl::UnavailableError("no worker");
  CHECK(params.Translate(other) == other);
}

}  // namespace
}  // namespace llmc::gateway
