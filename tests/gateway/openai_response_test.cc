#include "gateway/openai/openai_response.h"

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "gateway/openai/openai_error.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;

OpenAiRequest ParsedChat(const json& extra = json::object()) {
  json body = {{"model", "qwen"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (const auto& [key, value] : extra.items()) body[key] = value;
  absl::StatusOr<OpenAiRequest> request = ParseChatCompletionRequest(body.dump());
  REQUIRE(request.ok());
  return *request;
}

OpenAiRequest ParsedCompletion(const json& extra = json::object()) {
  json body = {{"model", "qwen"}, {"prompt", "Say:"}};
  for (const auto& [key, value] : extra.items()) body[key] = value;
  absl::StatusOr<OpenAiRequest> request = ParseCompletionRequest(body.dump());
  REQUIRE(request.ok());
  return *request;
}

OpenAiResponseBuilder Builder(const OpenAiRequest& request) {
  return OpenAiResponseBuilder(request, request.kind == OpenAiKind::kChat ? "chatcmpl-abc" : "cmpl-abc", 1700000000,
                               "qwen", "llmc-0.1.0");
}

v1::TokenDelta* AddDelta(v1::GenerateResponse& response, uint32_t choice, const std::string& text,
                         v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED, const std::string& stop_reason = "") {
  v1::TokenDelta* delta = response.add_deltas();
  delta->set_choice_index(choice);
  delta->set_text(text);
  delta->set_finish_reason(finish);
  delta->set_stop_reason(stop_reason);
  return delta;
}

void AddLogprob(v1::TokenDelta& delta, const std::string& token, float logprob,
                const std::vector<std::pair<std::string, float>>& top = {}) {
  v1::TokenLogprob* entry = delta.add_logprobs();
  entry->set_token(token);
  entry->set_token_bytes(token);
  entry->set_logprob(logprob);
  for (const auto& [text, value] : top) {
    v1::TopLogprob* alternative = entry->add_top();
    alternative->set_token(text);
    alternative->set_token_bytes(text);
    alternative->set_logprob(value);
  }
}

// A prompt logprob entry: the token (id, text), its logprob and rank, and its alternatives (id, text, logprob).
void AddPromptLogprob(v1::GenerateResponse& response, int32_t id, const std::string& token, float logprob,
                      uint32_t rank, const std::vector<std::tuple<int32_t, std::string, float>>& top = {}) {
  v1::TokenLogprob* entry = response.add_prompt_logprobs();
  entry->set_token_id(id);
  entry->set_token(token);
  entry->set_token_bytes(token);
  entry->set_logprob(logprob);
  entry->set_rank(rank);
  for (const auto& [alternative_id, text, value] : top) {
    v1::TopLogprob* alternative = entry->add_top();
    alternative->set_token_id(alternative_id);
    alternative->set_token(text);
    alternative->set_token_bytes(text);
    alternative->set_logprob(value);
  }
}

// "Say:" as the worker scores it: "Say" (nothing predicts it), then ":" at rank 2 behind "!".
void AddSayPromptLogprobs(v1::GenerateResponse& response) {
  AddPromptLogprob(response, 10, "Say", 0.0f, 0);
  AddPromptLogprob(response, 11, ":", -1.5f, 2, {{12, "!", -0.5f}, {11, ":", -1.5f}, {13, "?", -2.5f}});
}

v1::Usage MakeUsage(uint32_t prompt, uint32_t completion) {
  v1::Usage usage;
  usage.set_prompt_tokens(prompt);
  usage.set_completion_tokens(completion);
  usage.set_total_tokens(prompt + completion);
  return usage;
}

std::vector<json> ParseAll(const std::vector<std::string>& chunks) {
  std::vector<json> out;
  for (const std::string& chunk : chunks) {
    CHECK(chunk.find("data:") == std::string::npos);  // the HTTP layer frames events
    CHECK(chunk.find('\n') == std::string::npos);     // one line per event
    out.push_back(json::parse(chunk));
  }
  return out;
}

std::vector<json> Stream(OpenAiResponseBuilder& builder, const v1::GenerateResponse& response, size_t prompt = 0) {
  absl::StatusOr<std::vector<std::string>> chunks = builder.OnResponse(response, prompt);
  REQUIRE(chunks.ok());
  return ParseAll(*chunks);
}

void CheckHeader(const json& chunk, const std::string& object, const std::string& id) {
  CHECK(chunk.at("id") == id);
  CHECK(chunk.at("object") == object);
  CHECK(chunk.at("created") == 1700000000);
  CHECK(chunk.at("model") == "qwen");
  CHECK(chunk.at("system_fingerprint") == "llmc-0.1.0");
}

TEST_CASE("openai_response: chat stream starts with a role chunk per choice", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedChat({{"n", 2}, {"stream", true}}));
  const std::vector<json> chunks = ParseAll(builder.Start());
  REQUIRE(chunks.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CheckHeader(chunks[i], "chat.completion.chunk", "chatcmpl-abc");
    CHECK_FALSE(chunks[i].contains("usage"));
    REQUIRE(chunks[i]["choices"].size() == 1);
    const json& choice = chunks[i]["choices"][0];
    CHECK(choice["index"] == i);
    CHECK(choice["delta"] == json{{"role", "assistant"}, {"content", ""}});
    CHECK(choice["logprobs"].is_null());
    CHECK(choice["finish_reason"].is_null());
  }
}

TEST_CASE("openai_response: chat chunks carry each choice's delta with its index", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedChat({{"n", 2}, {"stream", true}}));
  v1::GenerateResponse response;
  AddDelta(response, 0, "Hel");
  AddDelta(response, 1, "");  // bytes held back: no chunk
  std::vector<json> chunks = Stream(builder, response);
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0]["choices"][0]["index"] == 0);
  CHECK(chunks[0]["choices"][0]["delta"] == json{{"content", "Hel"}});
  CHECK(chunks[0]["choices"][0]["finish_reason"].is_null());
  CHECK(chunks[0]["choices"][0]["stop_reason"].is_null());

  response.Clear();
  AddDelta(response, 1, "Wor");
  AddDelta(response, 0, "lo", v1::FINISH_REASON_STOP, "");
  chunks = Stream(builder, response);
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0]["choices"][0]["index"] == 1);
  CHECK(chunks[0]["choices"][0]["delta"]["content"] == "Wor");
  CHECK(chunks[1]["choices"][0]["index"] == 0);
  CHECK(chunks[1]["choices"][0]["delta"]["content"] == "lo");
  CHECK(chunks[1]["choices"][0]["finish_reason"] == "stop");
  CHECK(chunks[1]["choices"][0]["stop_reason"].is_null());

  // A finish with no text still yields a chunk, with an empty delta.
  response.Clear();
  AddDelta(response, 1, "", v1::FINISH_REASON_LENGTH);
  chunks = Stream(builder, response);
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0]["choices"][0]["index"] == 1);
  CHECK(chunks[0]["choices"][0]["delta"] == json::object());
  CHECK(chunks[0]["choices"][0]["finish_reason"] == "length");
  CheckHeader(chunks[0], "chat.completion.chunk", "chatcmpl-abc");

  // No usage chunk unless asked for.
  CHECK(builder.Finish(MakeUsage(3, 4)).empty());
}

TEST_CASE("openai_response: include_usage puts usage null on chunks and ends with a usage chunk", "[unit][openai]") {
  OpenAiResponseBuilder builder =
      Builder(ParsedChat({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  for (const json& chunk : ParseAll(builder.Start())) {
    REQUIRE(chunk.contains("usage"));
    CHECK(chunk["usage"].is_null());
  }
  v1::GenerateResponse response;
  AddDelta(response, 0, "ok", v1::FINISH_REASON_STOP);
  for (const json& chunk : Stream(builder, response)) {
    REQUIRE(chunk.contains("usage"));
    CHECK(chunk["usage"].is_null());
  }
  const std::vector<json> last = ParseAll(builder.Finish(MakeUsage(12, 7)));
  REQUIRE(last.size() == 1);
  CheckHeader(last[0], "chat.completion.chunk", "chatcmpl-abc");
  CHECK(last[0]["choices"] == json::array());
  CHECK(last[0]["usage"] == json{{"prompt_tokens", 12}, {"completion_tokens", 7}, {"total_tokens", 19}});

  v1::Usage cached = MakeUsage(12, 7);
  cached.set_cached_prompt_tokens(8);
  const json with_cache = json::parse(builder.Finish(cached).at(0));
  CHECK(with_cache["usage"]["prompt_tokens_details"]["cached_tokens"] == 8);
}

TEST_CASE("openai_response: completion stream chunks", "[unit][openai]") {
  OpenAiResponseBuilder builder =
      Builder(ParsedCompletion({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  CHECK(builder.Start().empty());
  v1::GenerateResponse response;
  AddDelta(response, 0, " once");
  AddDelta(response, 0, "", v1::FINISH_REASON_STOP, "\n");
  const std::vector<json> chunks = Stream(builder, response);
  REQUIRE(chunks.size() == 2);
  CheckHeader(chunks[0], "text_completion", "cmpl-abc");
  CHECK(chunks[0]["choices"][0]["text"] == " once");
  CHECK(chunks[0]["choices"][0]["logprobs"].is_null());
  CHECK(chunks[0]["choices"][0]["finish_reason"].is_null());
  CHECK(chunks[1]["choices"][0]["text"] == "");
  CHECK(chunks[1]["choices"][0]["finish_reason"] == "stop");
  CHECK(chunks[1]["usage"].is_null());
  const std::vector<json> last = ParseAll(builder.Finish(MakeUsage(2, 1)));
  REQUIRE(last.size() == 1);
  CheckHeader(last[0], "text_completion", "cmpl-abc");
  CHECK(last[0]["choices"].empty());
  CHECK(last[0]["usage"]["total_tokens"] == 3);
}

TEST_CASE("openai_response: completion echo streams each prompt before its first tokens", "[unit][openai]") {
  OpenAiResponseBuilder builder =
      Builder(ParsedCompletion({{"stream", true}, {"echo", true}, {"n", 2}, {"prompt", {"Say:", "Do:"}}}));
  CHECK(builder.Start().empty());
  v1::GenerateResponse second_prompt;
  AddDelta(second_prompt, 3, " it");
  std::vector<json> chunks = Stream(builder, second_prompt, 1);
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[0]["choices"][0]["index"] == 2);
  CHECK(chunks[1]["choices"][0]["index"] == 3);
  CHECK(chunks[1]["choices"][0]["text"] == "Do:");
  CHECK(chunks[1]["choices"][0]["logprobs"].is_null());
  CHECK(chunks[1]["choices"][0]["finish_reason"].is_null());
  CHECK(chunks[2]["choices"][0]["text"] == " it");
  // The prompt is echoed once.
  chunks = Stream(builder, second_prompt, 1);
  CHECK(chunks.size() == 1);
  v1::GenerateResponse first_prompt;
  AddDelta(first_prompt, 0, " so");
  chunks = Stream(builder, first_prompt, 0);
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[0]["choices"][0]["index"] == 0);
  CHECK(chunks[0]["choices"][0]["text"] == "Say:");
  CHECK(chunks[1]["choices"][0]["index"] == 1);
}

TEST_CASE("openai_response: non-streaming chat body", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedChat({{"n", 2}, {"stop", {"END", "42"}}, {"stop_token_ids", {42, 7}}}));
  v1::GenerateResponse response;
  AddDelta(response, 0, "Hello");
  AddDelta(response, 1, "Bye");
  REQUIRE(builder.Accumulate(response).ok());
  response.Clear();
  AddDelta(response, 0, ", world", v1::FINISH_REASON_STOP, "END");
  AddDelta(response, 1, "", v1::FINISH_REASON_STOP, "7");
  REQUIRE(builder.Accumulate(response).ok());
  const json body = json::parse(builder.FinalJson(MakeUsage(5, 6)));
  CheckHeader(body, "chat.completion", "chatcmpl-abc");
  REQUIRE(body["choices"].size() == 2);
  const json& first = body["choices"][0];
  CHECK(first["index"] == 0);
  CHECK(first["message"] == json{{"role", "assistant"}, {"content", "Hello, world"}});
  CHECK(first["logprobs"].is_null());
  CHECK(first["finish_reason"] == "stop");
  CHECK(first["stop_reason"] == "END");
  const json& second = body["choices"][1];
  CHECK(second["index"] == 1);
  CHECK(second["message"]["content"] == "Bye");
  CHECK(second["stop_reason"] == 7);  // a stop token id is reported as a number, like vLLM
  CHECK(body["usage"] == json{{"prompt_tokens", 5}, {"completion_tokens", 6}, {"total_tokens", 11}});
  // The key order follows OpenAI's.
  CHECK(builder.FinalJson(MakeUsage(5, 6)).rfind("{\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion\"", 0) == 0);
}

TEST_CASE("openai_response: stop_reason for strings that look like numbers, EOS and length", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedChat({{"n", 3}, {"stop", "42"}, {"stop_token_ids", {42}}}));
  v1::GenerateResponse response;
  AddDelta(response, 0, "a", v1::FINISH_REASON_STOP, "42");  // the stop string wins the ambiguity
  AddDelta(response, 1, "b", v1::FINISH_REASON_STOP, "");    // EOS
  AddDelta(response, 2, "c", v1::FINISH_REASON_LENGTH, "");
  REQUIRE(builder.Accumulate(response).ok());
  const json body = json::parse(builder.FinalJson(MakeUsage(1, 3)));
  CHECK(body["choices"][0]["stop_reason"] == "42");
  CHECK(body["choices"][1]["stop_reason"].is_null());
  CHECK(body["choices"][1]["finish_reason"] == "stop");
  CHECK(body["choices"][2]["stop_reason"].is_null());
  CHECK(body["choices"][2]["finish_reason"] == "length");
}

TEST_CASE("openai_response: non-streaming completion with echo", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedCompletion({{"echo", true}}));
  v1::GenerateResponse response;
  AddDelta(response, 0, " hello", v1::FINISH_REASON_LENGTH);
  REQUIRE(builder.Accumulate(response).ok());
  const json body = json::parse(builder.FinalJson(MakeUsage(2, 1)));
  CheckHeader(body, "text_completion", "cmpl-abc");
  REQUIRE(body["choices"].size() == 1);
  CHECK(body["choices"][0]["index"] == 0);
  CHECK(body["choices"][0]["text"] == "Say: hello");
  CHECK(body["choices"][0]["logprobs"].is_null());
  CHECK(body["choices"][0]["finish_reason"] == "length");
  CHECK(body["usage"]["total_tokens"] == 3);

  OpenAiResponseBuilder plain = Builder(ParsedCompletion());
  REQUIRE(plain.Accumulate(response).ok());
  CHECK(json::parse(plain.FinalJson(MakeUsage(2, 1)))["choices"][0]["text"] == " hello");
}

TEST_CASE("openai_response: best_of answers each prompt's n best choices by cumulative logprob", "[unit][openai]") {
  // Two prompts, n = 2 of best_of = 3: generated choices 0-2 answer prompt 0 and 3-5 prompt 1.
  const OpenAiRequest request = ParsedCompletion({{"prompt", {"A:", "B:"}}, {"n", 2}, {"best_of", 3}});
  OpenAiResponseBuilder builder = Builder(request);
  const std::vector<std::vector<float>> logprobs = {{-1, -1}, {-0.5f, -0.1f}, {-3}, {-2}, {-0.2f}, {-0.1f, -0.1f}};
  v1::GenerateResponse response;
  for (uint32_t choice = 0; choice < logprobs.size(); ++choice) {
    v1::TokenDelta* delta = AddDelta(response, choice, "c" + std::to_string(choice), v1::FINISH_REASON_STOP);
    for (const float logprob : logprobs[choice]) AddLogprob(*delta, "t", logprob);
  }
  REQUIRE(builder.Accumulate(response).ok());
  const json body = json::parse(builder.FinalJson(MakeUsage(4, 9)));
  REQUIRE(body["choices"].size() == 4);
  const std::vector<std::string> expected = {"c1", "c0", "c4", "c5"};  // -0.6 > -2; a tie keeps its order
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("answer " << i);
    CHECK(body["choices"][i]["index"] == i);
    CHECK(body["choices"][i]["text"] == expected[i]);
    CHECK(body["choices"][i]["logprobs"].is_null());  // ranked by them, but the client asked for none
  }
  CHECK(body["usage"]["completion_tokens"] == 9);  // every generated token was computed
}

TEST_CASE("openai_response: chat logprobs format", "[unit][openai]") {
  const OpenAiRequest request = ParsedChat({{"logprobs", true}, {"top_logprobs", 2}, {"stream", true}});
  v1::GenerateResponse response;
  v1::TokenDelta* delta = AddDelta(response, 0, "Hi!");
  AddLogprob(*delta, "Hi", -0.25f, {{"Hi", -0.25f}, {"Hello", -1.5f}});
  AddLogprob(*delta, "!", -0.5f, {{"!", -0.5f}, {".", -2.0f}});

  OpenAiResponseBuilder streaming = Builder(request);
  std::vector<json> chunks = Stream(streaming, response);
  REQUIRE(chunks.size() == 1);
  const json& content = chunks[0]["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() == 2);
  CHECK(content[0]["token"] == "Hi");
  CHECK(content[0]["logprob"] == -0.25);
  CHECK(content[0]["bytes"] == json::array({72, 105}));
  REQUIRE(content[0]["top_logprobs"].size() == 2);
  CHECK(content[0]["top_logprobs"][1] ==
        json{{"token", "Hello"}, {"logprob", -1.5}, {"bytes", {72, 101, 108, 108, 111}}});
  CHECK(content[1]["token"] == "!");

  // Logprobs of tokens whose text is still held back are not lost.
  v1::GenerateResponse held;
  AddLogprob(*AddDelta(held, 0, ""), "\xe4", -0.1f);
  chunks = Stream(streaming, held);
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0]["choices"][0]["delta"]["content"] == "");
  CHECK(chunks[0]["choices"][0]["logprobs"]["content"][0]["bytes"] == json::array({0xe4}));

  OpenAiResponseBuilder whole = Builder(request);
  REQUIRE(whole.Accumulate(response).ok());
  response.Clear();
  AddLogprob(*AddDelta(response, 0, "", v1::FINISH_REASON_STOP), "<eos>", -0.125f);
  REQUIRE(whole.Accumulate(response).ok());
  const json body = json::parse(whole.FinalJson(MakeUsage(1, 3)));
  const json& all = body["choices"][0]["logprobs"]["content"];
  REQUIRE(all.size() == 3);
  CHECK(all[2]["token"] == "<eos>");
  CHECK(all[2]["top_logprobs"] == json::array());
  CHECK(all[2]["logprob"] == -0.125);
}

TEST_CASE("openai_response: chat logprobs requested but absent is an empty content list", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedChat({{"logprobs", true}}));
  v1::GenerateResponse response;
  AddDelta(response, 0, "", v1::FINISH_REASON_STOP);
  REQUIRE(builder.Accumulate(response).ok());
  CHECK(json::parse(builder.FinalJson(MakeUsage(1, 0)))["choices"][0]["logprobs"] == json{{"content", json::array()}});
}

TEST_CASE("openai_response: completion logprobs format and text offsets", "[unit][openai]") {
  // "Say:" is 4 code points; the offsets of the generated tokens start after the echoed prompt.
  const OpenAiRequest request = ParsedCompletion({{"logprobs", 1}, {"echo", true}});
  v1::GenerateResponse first;
  v1::TokenDelta* delta = AddDelta(first, 0, " 日本");
  AddLogprob(*delta, " 日", -0.5f, {{" 月", -0.25f}});
  AddLogprob(*delta, "本", -1.0f, {{"本", -1.0f}});
  v1::GenerateResponse second;
  delta = AddDelta(second, 0, "😀", v1::FINISH_REASON_LENGTH);
  AddLogprob(*delta, "😀", -2.0f, {{"😀", -2.0f}});

  OpenAiResponseBuilder whole = Builder(request);
  REQUIRE(whole.Accumulate(first).ok());
  REQUIRE(whole.Accumulate(second).ok());
  const json body = json::parse(whole.FinalJson(MakeUsage(2, 3)));
  const json& logprobs = body["choices"][0]["logprobs"];
  CHECK(body["choices"][0]["text"] == "Say: 日本😀");
  CHECK(logprobs["tokens"] == json::array({" 日", "本", "😀"}));
  CHECK(logprobs["token_logprobs"] == json::array({-0.5, -1.0, -2.0}));
  REQUIRE(logprobs["top_logprobs"].size() == 3);
  // The alternatives plus the sampled token.
  CHECK(logprobs["top_logprobs"][0] == json{{" 月", -0.25}, {" 日", -0.5}});
  CHECK(logprobs["top_logprobs"][1] == json{{"本", -1.0}});
  CHECK(logprobs["text_offset"] == json::array({4, 6, 7}));

  // Streaming continues the offsets across chunks.
  OpenAiResponseBuilder streaming = Builder(request);
  std::vector<json> chunks = Stream(streaming, first);
  CHECK(chunks.at(0)["choices"][0]["text"] == "Say:");  // the echo, here without prompt logprobs
  CHECK(chunks.at(1)["choices"][0]["logprobs"]["text_offset"] == json::array({4, 6}));
  chunks = Stream(streaming, second);
  CHECK(chunks.at(0)["choices"][0]["logprobs"]["text_offset"] == json::array({7}));
  CHECK(chunks.at(0)["choices"][0]["logprobs"]["tokens"] == json::array({"😀"}));
  CHECK(chunks.at(0)["choices"][0]["finish_reason"] == "length");

  // Without echo the offsets start at 0.
  OpenAiResponseBuilder no_echo = Builder(ParsedCompletion({{"logprobs", 0}}));
  REQUIRE(no_echo.Accumulate(first).ok());
  const json plain = json::parse(no_echo.FinalJson(MakeUsage(2, 2)));
  CHECK(plain["choices"][0]["logprobs"]["text_offset"] == json::array({0, 2}));
}

TEST_CASE("openai_response: logprobs that JSON cannot carry, and float noise", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedChat({{"logprobs", true}, {"top_logprobs", 1}}));
  v1::GenerateResponse response;
  v1::TokenDelta* delta = AddDelta(response, 0, "x", v1::FINISH_REASON_STOP);
  AddLogprob(*delta, "x", -0.1f, {{"y", -std::numeric_limits<float>::infinity()}});
  AddLogprob(*delta, "z", std::numeric_limits<float>::quiet_NaN());
  REQUIRE(builder.Accumulate(response).ok());
  const std::string text = builder.FinalJson(MakeUsage(1, 2));
  CHECK(text.find("\"logprob\":-0.1,") != std::string::npos);  // not -0.10000000149011612
  const json body = json::parse(text);
  const json& content = body["choices"][0]["logprobs"]["content"];
  CHECK(content[0]["top_logprobs"][0]["logprob"] == -9999.0);
  CHECK(content[1]["logprob"] == -9999.0);
}

TEST_CASE("openai_response: aborted, failed and unknown choices are errors", "[unit][openai]") {
  for (const bool streaming : {true, false}) {
    INFO(streaming);
    OpenAiResponseBuilder builder = Builder(ParsedChat({{"n", 2}}));
    const auto feed = [&](const v1::GenerateResponse& response) {
      return streaming ? builder.OnResponse(response).status() : builder.Accumulate(response);
    };
    v1::GenerateResponse response;
    AddDelta(response, 0, "a", v1::FINISH_REASON_ABORT);
    absl::Status status = feed(response);
    CHECK(status.code() == absl::StatusCode::kUnavailable);
    CHECK(HttpStatusOf(status) == 503);
    response.Clear();
    AddDelta(response, 1, "a", v1::FINISH_REASON_ERROR);
    status = feed(response);
    CHECK(status.code() == absl::StatusCode::kInternal);
    CHECK(HttpStatusOf(status) == 500);
    response.Clear();
    AddDelta(response, 2, "a");
    status = feed(response);
    CHECK(status.code() == absl::StatusCode::kInternal);
    CHECK_THAT(std::string(status.message()), Catch::Contains("choice 2"));
  }
}

TEST_CASE("openai_response: awkward text round-trips through JSON", "[unit][openai]") {
  const std::string awkward = "line1\nline2\r\n\t\"quoted\" back\\slash \x01 </script> 漢字 한국어 😀🚀 \u00e9";
  OpenAiResponseBuilder chat = Builder(ParsedChat({{"stream", true}}));
  v1::GenerateResponse response;
  AddDelta(response, 0, awkward, v1::FINISH_REASON_STOP);
  const std::vector<json> chunks = Stream(chat, response);
  CHECK(chunks.at(0)["choices"][0]["delta"]["content"] == awkward);

  OpenAiResponseBuilder completion = Builder(ParsedCompletion({{"prompt", awkward}, {"echo", true}}));
  REQUIRE(completion.Accumulate(response).ok());
  const std::string body = completion.FinalJson(MakeUsage(1, 1));
  CHECK(json::parse(body)["choices"][0]["text"] == awkward + awkward);
  CHECK(body.find("漢字") != std::string::npos);  // UTF-8 as is, not \u escapes
}

TEST_CASE("openai_response: invalid UTF-8 from a worker never throws", "[unit][openai]") {
  OpenAiResponseBuilder builder = Builder(ParsedCompletion({{"logprobs", 1}}));
  v1::GenerateResponse response;
  v1::TokenDelta* delta = AddDelta(response, 0, "ok\xff\xfe", v1::FINISH_REASON_STOP, "\xc3");
  AddLogprob(*delta, "\xe4\xb8", -1.0f, {{"\xff", -2.0f}});
  absl::StatusOr<std::vector<std::string>> chunks = builder.OnResponse(response);
  REQUIRE(chunks.ok());
  REQUIRE(chunks->size() == 1);
  const json chunk = json::parse(chunks->front());
  CHECK(chunk["choices"][0]["text"] == "ok\xef\xbf\xbd\xef\xbf\xbd");
  REQUIRE(builder.Accumulate(response).ok());
  CHECK(json::parse(builder.FinalJson(MakeUsage(1, 1))).is_object());
}

TEST_CASE("openai_response: response ids", "[unit][openai]") {
  const std::string chat = NewResponseId(OpenAiKind::kChat);
  const std::string completion = NewResponseId(OpenAiKind::kCompletion);
  CHECK(std::regex_match(chat, std::regex("chatcmpl-[0-9a-f]{32}")));
  CHECK(std::regex_match(completion, std::regex("cmpl-[0-9a-f]{32}")));
  CHECK(NewResponseId(OpenAiKind::kChat) != chat);
}

TEST_CASE("openai_error: the OpenAI envelope", "[unit][openai]") {
  json error = json::parse(ErrorEnvelope(InvalidParameter("temperature", "'temperature' must be a number")));
  CHECK(error == json{{"error",
                       {{"message", "'temperature' must be a number"},
                        {"type", "invalid_request_error"},
                        {"param", "temperature"},
                        {"code", nullptr}}}});

  error = json::parse(ErrorEnvelope(WithErrorCode(absl::NotFoundError("model 'x' does not exist"), "model_not_found")));
  CHECK(error["error"]["type"] == "not_found_error");
  CHECK(error["error"]["param"].is_null());
  CHECK(error["error"]["code"] == "model_not_found");
  CHECK(error["error"]["message"] == "model 'x' does not exist");

  const absl::Status busy = absl::ResourceExhaustedError("all workers are busy");
  CHECK(HttpStatusOf(busy) == 429);
  CHECK(json::parse(StreamErrorEvent(busy))["error"]["type"] == "rate_limit_error");
  CHECK(StreamErrorEvent(busy) == ErrorEnvelope(busy));
  CHECK(HttpStatusOf(absl::UnavailableError("x")) == 503);
  CHECK(HttpStatusOf(absl::DeadlineExceededError("x")) == 504);
  CHECK(HttpStatusOf(absl::OkStatus()) == 500);
  CHECK(json::parse(ErrorEnvelope(absl::OkStatus()))["error"]["type"] == "server_error");

  // Messages with bytes that are not UTF-8 (echoed from a client, say) still give valid JSON.
  error = json::parse(ErrorEnvelope(absl::InvalidArgumentError("bad \xff byte")));
  CHECK(error["error"]["message"] ==
        "bad \xef\xbf\xbd"
        " byte");

  CHECK(ParameterOf(absl::InvalidArgumentError("plain")).empty());
  CHECK(ParameterOf(InvalidParameter("messages[0].role", "x")) == "messages[0].role");
  CHECK(ErrorCodeOf(absl::InternalError("x")).empty());
  CHECK(WithErrorCode(absl::OkStatus(), "x").ok());
}

TEST_CASE("openai_error: engine exception text and worker addresses never reach the client", "[unit][openai]") {
  const auto message_of = [](const absl::Status& status) {
    return json::parse(ErrorEnvelope(status))["error"]["message"].get<std::string>();
  };
  const std::vector<std::string> leaks = {"10.0.0.5", "21002", "CUDA", "c10", "threw", "ipv4", "illegal", "fd00"};
  const auto check_clean = [&](const std::string& message) {
    INFO(message);
    for (const std::string& leak : leaks) CHECK(message.find(leak) == std::string::npos);
  };
  // A failed model step (INTERNAL with libtorch's text), as the worker sends it.
  const absl::Status model_failed = WithErrorCode(
      absl::InternalError("the model step threw: CUDA error: an illegal memory access was encountered\n"
                          "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44"),
      "x_code");
  check_clean(message_of(model_failed));
  CHECK(message_of(model_failed) == "the server failed while processing this request");
  CHECK(json::parse(ErrorEnvelope(model_failed))["error"]["type"] == "server_error");
  CHECK(json::parse(ErrorEnvelope(model_failed))["error"]["code"] == "x_code");  // payloads are kept
  CHECK(HttpStatusOf(ForClient(model_failed)) == 500);
  check_clean(json::parse(StreamErrorEvent(model_failed))["error"]["message"].get<std::string>());

  // gRPC's transport errors name the worker's address.
  for (const absl::Status& status : {
           absl::UnavailableError("failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.5:21002: "
                                  "Failed to connect to remote host: Connection refused"),
           absl::UnavailableError("connections to all backends failing; last error: [fd00::5]:21002"),
           absl::DeadlineExceededError("Deadline Exceeded at 10.0.0.5:21002"),
           absl::UnknownError("Stream removed by 10.0.0.5"),
       }) {
    const absl::Status client = ForClient(status);
    CHECK(client.code() == status.code());
    check_clean(message_of(status));
  }
  CHECK(message_of(absl::UnavailableError("failed to connect to all addresses; ipv4:10.0.0.5:21002")) ==
        "no worker could serve this request right now; retry shortly");

  // Messages about the request itself, or the cluster's state without its inside, pass unchanged.
  CHECK(message_of(absl::UnavailableError("the gateway is shutting down")) == "the gateway is shutting down");
  CHECK(message_of(absl::ResourceExhaustedError("all workers are busy")) == "all workers are busy");
  CHECK(message_of(absl::NotFoundError("model 'torch-10.0.0.5' does not exist")) ==
        "model 'torch-10.0.0.5' does not exist");
  CHECK(message_of(InvalidParameter("messages", "CUDA is not a role")) == "CUDA is not a role");
}

TEST_CASE("openai_response: echo with logprobs puts the prompt's logprobs first", "[unit][openai]") {
  const OpenAiRequest request = ParsedCompletion({{"logprobs", 1}, {"echo", true}, {"n", 2}});
  v1::GenerateResponse first;
  AddSayPromptLogprobs(first);
  AddLogprob(*AddDelta(first, 0, " hi"), " hi", -0.25f, {{" hi", -0.25f}});
  v1::GenerateResponse second;
  AddLogprob(*AddDelta(second, 1, " yo", v1::FINISH_REASON_LENGTH), " yo", -0.75f, {{" yo", -0.75f}});
  AddDelta(second, 0, "", v1::FINISH_REASON_LENGTH);

  OpenAiResponseBuilder whole = Builder(request);
  REQUIRE(whole.Accumulate(first).ok());
  REQUIRE(whole.Accumulate(second).ok());
  const json body = json::parse(whole.FinalJson(MakeUsage(2, 2)));
  for (int c = 0; c < 2; ++c) {
    INFO("choice " << c);
    const json& logprobs = body["choices"][c]["logprobs"];
    CHECK(body["choices"][c]["text"] == (c == 0 ? "Say: hi" : "Say: yo"));
    CHECK(logprobs["tokens"] == json::array({"Say", ":", c == 0 ? " hi" : " yo"}));
    CHECK(logprobs["token_logprobs"] == json::array({nullptr, -1.5, c == 0 ? -0.25 : -0.75}));
    REQUIRE(logprobs["top_logprobs"].size() == 3);
    CHECK(logprobs["top_logprobs"][0].is_null());
    // One alternative, as `logprobs` asks, plus the token itself.
    CHECK(logprobs["top_logprobs"][1] == json{{"!", -0.5}, {":", -1.5}});
    CHECK(logprobs["text_offset"] == json::array({0, 3, 4}));
    CHECK_FALSE(body["choices"][c].contains("prompt_logprobs"));
  }

  // Streaming: the echo chunks carry the prompt's logprobs and the tokens' offsets follow on.
  OpenAiResponseBuilder streaming = Builder(ParsedCompletion({{"logprobs", 1}, {"echo", true}, {"stream", true}}));
  const std::vector<json> chunks = Stream(streaming, first);
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0]["choices"][0]["text"] == "Say:");
  CHECK(chunks[0]["choices"][0]["logprobs"]["tokens"] == json::array({"Say", ":"}));
  CHECK(chunks[0]["choices"][0]["logprobs"]["token_logprobs"] == json::array({nullptr, -1.5}));
  CHECK(chunks[1]["choices"][0]["logprobs"]["tokens"] == json::array({" hi"}));
  CHECK(chunks[1]["choices"][0]["logprobs"]["text_offset"] == json::array({4}));

  // vLLM's return_tokens_as_token_ids names every token by its id.
  OpenAiResponseBuilder as_ids =
      Builder(ParsedCompletion({{"logprobs", 1}, {"echo", true}, {"return_tokens_as_token_ids", true}}));
  REQUIRE(as_ids.Accumulate(first).ok());
  const json ids_body = json::parse(as_ids.FinalJson(MakeUsage(2, 1)));
  CHECK(ids_body["choices"][0]["logprobs"]["tokens"] == json::array({"token_id:10", "token_id:11", "token_id:0"}));
  CHECK(ids_body["choices"][0]["logprobs"]["top_logprobs"][1] == json{{"token_id:12", -0.5}, {"token_id:11", -1.5}});
}

TEST_CASE("openai_response: vLLM's prompt_logprobs per completion choice and beside the chat choices",
          "[unit][openai]") {
  v1::GenerateResponse first;
  AddSayPromptLogprobs(first);
  AddDelta(first, 0, " hi", v1::FINISH_REASON_STOP);
  const json expected = json::array({nullptr,
                                     {{"11", {{"logprob", -1.5}, {"rank", 2}, {"decoded_token", ":"}}},
                                      {"12", {{"logprob", -0.5}, {"rank", 1}, {"decoded_token", "!"}}}}});

  OpenAiResponseBuilder completion = Builder(ParsedCompletion({{"prompt_logprobs", 1}}));
  REQUIRE(completion.Accumulate(first).ok());
  json body = json::parse(completion.FinalJson(MakeUsage(2, 1)));
  CHECK(body["choices"][0]["prompt_logprobs"] == expected);
  CHECK(body["choices"][0]["logprobs"].is_null());
  CHECK(body["choices"][0]["text"] == " hi");

  OpenAiResponseBuilder chat = Builder(ParsedChat({{"prompt_logprobs", 1}}));
  REQUIRE(chat.Accumulate(first).ok());
  body = json::parse(chat.FinalJson(MakeUsage(2, 1)));
  CHECK(body["prompt_logprobs"] == expected);
  CHECK_FALSE(body["choices"][0].contains("prompt_logprobs"));

  // With several prompts each choice gets its own prompt's.
  OpenAiResponseBuilder two = Builder(ParsedCompletion({{"prompt_logprobs", 0}, {"prompt", {"Say:", "Do:"}}}));
  v1::GenerateResponse other;
  AddPromptLogprob(other, 20, "Do", 0.0f, 0);
  AddPromptLogprob(other, 11, ":", -0.125f, 1, {{11, ":", -0.125f}});
  AddDelta(other, 1, " it", v1::FINISH_REASON_STOP);
  REQUIRE(two.Accumulate(other, 1).ok());
  REQUIRE(two.Accumulate(first, 0).ok());
  body = json::parse(two.FinalJson(MakeUsage(4, 2)));
  CHECK(body["choices"][0]["prompt_logprobs"][1] ==
        json{{"11", {{"logprob", -1.5}, {"rank", 2}, {"decoded_token", ":"}}}});
  CHECK(body["choices"][1]["prompt_logprobs"][1] ==
        json{{"11", {{"logprob", -0.125}, {"rank", 1}, {"decoded_token", ":"}}}});

  // Without the parameter there is no such field.
  OpenAiResponseBuilder plain = Builder(ParsedCompletion());
  REQUIRE(plain.Accumulate(first).ok());
  CHECK_FALSE(json::parse(plain.FinalJson(MakeUsage(2, 1)))["choices"][0].contains("prompt_logprobs"));
}

// The worker's typed parts of one chat delta.
v1::TokenDelta* AddTypedDelta(v1::GenerateResponse& response, const std::string& reasoning, const std::string& content,
                              std::vector<v1::ToolCallDelta> calls = {},
                              v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED) {
  v1::TokenDelta* delta = AddDelta(response, 0, reasoning + content, finish);
  delta->mutable_typed()->set_reasoning(reasoning);
  delta->mutable_typed()->set_content(content);
  for (v1::ToolCallDelta& call : calls) *delta->mutable_typed()->add_tool_calls() = std::move(call);
  return delta;
}

v1::ToolCallDelta Call(uint32_t index, const std::string& id, const std::string& name, const std::string& arguments) {
  v1::ToolCallDelta call;
  call.set_index(index);
  call.set_id(id);
  call.set_name(name);
  call.set_arguments(arguments);
  return call;
}

std::vector<v1::GenerateResponse> TypedAnswer() {
  std::vector<v1::GenerateResponse> steps(3);
  AddTypedDelta(steps[0], "Need weather.", "");
  AddTypedDelta(steps[1], "", "Checking.", {Call(0, "call_a", "get_weather", "{\"city\":")});
  AddTypedDelta(steps[2], "", "", {Call(0, "", "", "\"Paris\"}"), Call(1, "call_b", "get_time", "{}")},
                v1::FINISH_REASON_TOOL_CALLS);
  return steps;
}

TEST_CASE("openai_response: typed chat output becomes message.tool_calls and reasoning", "[unit][openai][tools]") {
  const OpenAiRequest request = ParsedChat();
  OpenAiResponseBuilder builder = Builder(request);
  for (const v1::GenerateResponse& step : TypedAnswer()) REQUIRE(builder.Accumulate(step).ok());
  const json body = json::parse(builder.FinalJson(v1::Usage()));
  const json& choice = body["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  const json& message = choice["message"];
  CHECK(message["content"] == "Checking.");
  CHECK(message["reasoning_content"] == "Need weather.");
  CHECK(message["reasoning"] == "Need weather.");
  REQUIRE(message["tool_calls"].size() == 2);
  CHECK(message["tool_calls"][0] ==
        json{{"id", "call_a"},
             {"type", "function"},
             {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}});
  CHECK(message["tool_calls"][1]["function"]["name"] == "get_time");

  // Only calls: content is null, as OpenAI answers.
  OpenAiResponseBuilder calls_only = Builder(request);
  v1::GenerateResponse step;
  AddTypedDelta(step, "", "", {Call(0, "call_c", "f", "{}")}, v1::FINISH_REASON_TOOL_CALLS);
  REQUIRE(calls_only.Accumulate(step).ok());
  CHECK(json::parse(calls_only.FinalJson(v1::Usage()))["choices"][0]["message"]["content"].is_null());

  // include_reasoning: false drops the reasoning.
  const OpenAiRequest without = ParsedChat({{"include_reasoning", false}});
  OpenAiResponseBuilder dropped = Builder(without);
  for (const v1::GenerateResponse& answer : TypedAnswer()) REQUIRE(dropped.Accumulate(answer).ok());
  CHECK_FALSE(json::parse(dropped.FinalJson(v1::Usage()))["choices"][0]["message"].contains("reasoning_content"));
}

TEST_CASE("openai_response: streamed tool calls arrive as OpenAI sends them", "[unit][openai][tools]") {
  const OpenAiRequest request = ParsedChat({{"stream", true}});
  OpenAiResponseBuilder builder = Builder(request);
  std::vector<json> chunks;
  for (const v1::GenerateResponse& step : TypedAnswer()) {
    absl::StatusOr<std::vector<std::string>> out = builder.OnResponse(step);
    REQUIRE(out.ok());
    for (const std::string& chunk : *out) chunks.push_back(json::parse(chunk));
  }
  std::string reasoning, content;
  std::vector<json> calls;
  json finish = nullptr;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const json& choice = chunks[i]["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const json& entry : delta["tool_calls"]) {
        const size_t index = entry["index"];
        if (entry.contains("id")) {
          // The first entry of an index: id, type and name, with empty arguments.
          CHECK(index == calls.size());
          CHECK(entry["type"] == "function");
          CHECK(entry["function"]["arguments"] == "");
          calls.push_back({{"id", entry["id"]}, {"name", entry["function"]["name"]}, {"arguments", ""}});
        } else {
          REQUIRE(index < calls.size());
          CHECK_FALSE(entry["function"].contains("name"));
          calls[index]["arguments"] =
              calls[index]["arguments"].get<std::string>() + entry["function"]["arguments"].get<std::string>();
        }
      }
    }
    if (!choice["finish_reason"].is_null()) {
      CHECK(i + 1 == chunks.size());
      finish = choice["finish_reason"];
    }
  }
  CHECK(reasoning == "Need weather.");
  CHECK(content == "Checking.");
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]["id"] == "call_a");
  CHECK(calls[0]["arguments"] == "{\"city\":\"Paris\"}");
  CHECK(calls[1]["name"] == "get_time");
  CHECK(finish == "tool_calls");
}

}  // namespace
}  // namespace llmc::gateway
