// The bound on a non-streamed answer: refusing at parse time what can never fit, the size the builder
// reports against the body it writes, and a long prompt's logprobs joined from the worker's parts.
#include "gateway/openai/answer_size.h"

#include <string>
#include <vector>

#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_response.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;

constexpr uint64_t kCap = 64 << 20;

OpenAiRequest Parsed(OpenAiKind kind, const json& extra) {
  json body = {{"model", "qwen"}};
  if (kind == OpenAiKind::kChat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
  } else {
    body["prompt"] = "Say:";
  }
  for (const auto& [key, value] : extra.items()) body[key] = value;
  absl::StatusOr<OpenAiRequest> request =
      kind == OpenAiKind::kChat ? ParseChatCompletionRequest(body.dump()) : ParseCompletionRequest(body.dump());
  REQUIRE(request.ok());
  return *std::move(request);
}

OpenAiResponseBuilder SizedAnswerBuilder(const OpenAiRequest& request) {
  return OpenAiResponseBuilder(request, "id-abc", 1700000000, "qwen", "llmc-0.1.0");
}

// One step of every choice: a token of `text` with `alternatives` alternatives.
v1::GenerateResponse Step(uint32_t choices, const std::string& text, int alternatives,
                          v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED) {
  v1::GenerateResponse response;
  for (uint32_t choice = 0; choice < choices; ++choice) {
    v1::TokenDelta* delta = response.add_deltas();
    delta->set_choice_index(choice);
    delta->set_text(text);
    delta->set_finish_reason(finish);
    v1::TokenLogprob* entry = delta->add_logprobs();
    entry->set_token_id(1000);
    entry->set_token(text);
    entry->set_token_bytes(text);
    entry->set_logprob(-0.25f);
    for (int k = 0; k < alternatives; ++k) {
      v1::TopLogprob* top = entry->add_top();
      top->set_token_id(2000 + k);
      top->set_token(" alt" + std::to_string(k));
      top->set_token_bytes(" alt" + std::to_string(k));
      top->set_logprob(-1.5f - static_cast<float>(k));
    }
  }
  return response;
}

v1::Usage MakeUsage() {
  v1::Usage usage;
  usage.set_prompt_tokens(2);
  usage.set_completion_tokens(1);
  usage.set_total_tokens(3);
  return usage;
}

TEST_CASE("answer size: a non-streamed answer that could never fit is refused at once, naming the numbers",
          "[unit][openai]") {
  const OpenAiRequest huge =
      Parsed(OpenAiKind::kChat, {{"n", 16}, {"max_tokens", 100000}, {"logprobs", true}, {"top_logprobs", 20}});
  CHECK(LeastAnswerBytes(huge) == 16ull * 100000 * (54 + 20 * 36));
  const absl::Status refused = CheckAnswerCanFit(huge, kCap);
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParameterOf(refused) == "max_tokens");
  CHECK_THAT(std::string(refused.message()), Catch::Contains("16 choice(s) of up to 100000 tokens") &&
                                                 Catch::Contains("20 alternatives") && Catch::Contains("67108864") &&
                                                 Catch::Contains("'stream': true"));

  // Streamed, the same request holds nothing; smaller ones fit; without max_tokens nothing is known.
  CHECK(CheckAnswerCanFit(
            Parsed(OpenAiKind::kChat,
                   {{"n", 16}, {"max_tokens", 100000}, {"logprobs", true}, {"top_logprobs", 20}, {"stream", true}}),
            kCap)
            .ok());
  CHECK(
      CheckAnswerCanFit(
          Parsed(OpenAiKind::kChat, {{"n", 16}, {"max_tokens", 2000}, {"logprobs", true}, {"top_logprobs", 20}}), kCap)
          .ok());
  CHECK(CheckAnswerCanFit(Parsed(OpenAiKind::kChat, {{"n", 16}, {"max_tokens", 100000}}), kCap).ok());
  CHECK(CheckAnswerCanFit(Parsed(OpenAiKind::kChat, {{"n", 16}, {"logprobs", true}, {"top_logprobs", 20}}), kCap).ok());

  // Echo repeats the prompt in every choice.
  const OpenAiRequest echo =
      Parsed(OpenAiKind::kCompletion, {{"prompt", std::string(100000, 'a')}, {"n", 16}, {"echo", true}});
  CHECK(ParameterOf(CheckAnswerCanFit(echo, 1 << 20)) == "echo");
  CHECK(CheckAnswerCanFit(echo, 2 << 20).ok());

  const absl::Status too_large = AnswerTooLarge(70000000, kCap);
  CHECK(too_large.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(too_large.message()), Catch::Contains("70000000") && Catch::Contains("67108864"));
}

TEST_CASE("answer size: the bytes held are about the body's, and never below the refusal's least estimate",
          "[unit][openai]") {
  for (const OpenAiKind kind : {OpenAiKind::kChat, OpenAiKind::kCompletion}) {
    const int alternatives = kind == OpenAiKind::kChat ? 20 : 5;
    const json logprobs =
        kind == OpenAiKind::kChat ? json{{"logprobs", true}, {"top_logprobs", 20}} : json{{"logprobs", 5}};
    json extra = {{"n", 16}, {"max_tokens", 200}};
    extra.update(logprobs);
    const OpenAiRequest request = Parsed(kind, extra);
    OpenAiResponseBuilder builder = SizedAnswerBuilder(request);
    for (int step = 0; step < 200; ++step) {
      REQUIRE(builder
                  .Accumulate(Step(16, " w\"" + std::to_string(step), alternatives,
                                   step == 199 ? v1::FINISH_REASON_LENGTH : v1::FINISH_REASON_UNSPECIFIED))
                  .ok());
    }
    const std::string body = builder.FinalJson(MakeUsage());
    const json parsed = json::parse(body);
    REQUIRE(parsed["choices"].size() == 16);
    INFO("body " << body.size() << " bytes, held " << builder.AnswerBytes() << ", least " << LeastAnswerBytes(request));
    CHECK(builder.AnswerBytes() <= body.size());
    CHECK(body.size() <= builder.AnswerBytes() + 16 * 1024);
    CHECK(LeastAnswerBytes(request) <= body.size());
    if (kind == OpenAiKind::kChat) {
      CHECK(parsed["choices"][3]["logprobs"]["content"].size() == 200);
      CHECK(parsed["choices"][3]["logprobs"]["content"][7]["top_logprobs"].size() == 20);
      CHECK(parsed["choices"][3]["logprobs"]["content"][7]["token"] == " w\"7");
    } else {
      CHECK(parsed["choices"][3]["logprobs"]["tokens"].size() == 200);
      CHECK(parsed["choices"][3]["logprobs"]["text_offset"][2] == 8);
      CHECK(parsed["choices"][3]["logprobs"]["top_logprobs"][7].size() == 6);
    }
  }
}

// "Say:" as the worker scores it, in `entries` entries of prompt logprobs.
void AddPromptLogprobs(v1::GenerateResponse& response, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    v1::TokenLogprob* entry = response.add_prompt_logprobs();
    entry->set_token_id(100 + i);
    entry->set_token(i == 0 ? "Say" : ":");
    entry->set_token_bytes(entry->token());
    entry->set_logprob(i == 0 ? 0.0f : -1.5f);
    entry->set_rank(i == 0 ? 0 : 2);
    if (i == 0) continue;
    v1::TopLogprob* top = entry->add_top();
    top->set_token_id(12);
    top->set_token("!");
    top->set_logprob(-0.5f);
  }
}

TEST_CASE("answer size: a long prompt's logprobs sent in parts read as if they came in one message", "[unit][openai]") {
  const OpenAiRequest request =
      Parsed(OpenAiKind::kCompletion, {{"echo", true}, {"logprobs", 1}, {"prompt_logprobs", 1}, {"n", 2}});
  v1::GenerateResponse whole = Step(2, " hi", 1, v1::FINISH_REASON_LENGTH);
  AddPromptLogprobs(whole, 0, 6);
  OpenAiResponseBuilder one = SizedAnswerBuilder(request);
  REQUIRE(one.Accumulate(whole).ok());

  // The worker's parts: messages with only prompt logprobs, the last part riding with the deltas.
  OpenAiResponseBuilder parted = SizedAnswerBuilder(request);
  v1::GenerateResponse first;
  AddPromptLogprobs(first, 0, 2);
  v1::GenerateResponse second;
  AddPromptLogprobs(second, 2, 3);
  v1::GenerateResponse last = Step(2, " hi", 1, v1::FINISH_REASON_LENGTH);
  AddPromptLogprobs(last, 5, 1);
  REQUIRE(parted.Accumulate(first).ok());
  REQUIRE(parted.Accumulate(second).ok());
  REQUIRE(parted.Accumulate(last).ok());
  const std::string body = parted.FinalJson(MakeUsage());
  CHECK(body == one.FinalJson(MakeUsage()));
  const json parsed = json::parse(body);
  CHECK(parsed["choices"][1]["logprobs"]["tokens"].size() == 7);  // 6 of the prompt, 1 generated
  CHECK(parsed["choices"][1]["prompt_logprobs"].size() == 6);
  CHECK(parsed["choices"][1]["text"] == "Say: hi");

  // Streaming (echo with logprobs): nothing until the prompt's logprobs are whole, then the echo chunks.
  json stream_extra = {{"echo", true}, {"logprobs", 1}, {"stream", true}};
  OpenAiResponseBuilder streamed = SizedAnswerBuilder(Parsed(OpenAiKind::kCompletion, stream_extra));
  absl::StatusOr<std::vector<std::string>> chunks = streamed.OnResponse(first);
  REQUIRE(chunks.ok());
  CHECK(chunks->empty());
  chunks = streamed.OnResponse(second);
  REQUIRE(chunks.ok());
  CHECK(chunks->empty());
  v1::GenerateResponse last_of_one = Step(1, " hi", 1, v1::FINISH_REASON_LENGTH);
  AddPromptLogprobs(last_of_one, 5, 1);
  chunks = streamed.OnResponse(last_of_one);
  REQUIRE(chunks.ok());
  REQUIRE(chunks->size() == 2);  // the echo, then the token
  CHECK(json::parse((*chunks)[0])["choices"][0]["logprobs"]["tokens"].size() == 6);
  CHECK(json::parse((*chunks)[1])["choices"][0]["logprobs"]["text_offset"][0] == 8);
}

}  // namespace
}  // namespace llmc::gateway
