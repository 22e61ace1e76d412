// Generate, Tokenize and Detokenize requests from the wire to the engine: defaults and every refusal.
#include "worker/service/request_conversion.h"

#include <cmath>
#include <functional>

#include "tests/support/byte_tokenizer.h"
#include "tests/support/catch.h"

namespace llmc::worker {
namespace {

using testing::kImEnd;
using testing::kImStart;

constexpr uint32_t kContext = 64;

class ConversionFixture {
 protected:
  ConversionFixture() : tokenizer_(testing::MakeByteTokenizer()) {
    model_.info.set_name("fake-model");
    model_.info.set_max_context_length(kContext);
    model_.info.set_vocab_size(300);
    model_.info.set_chat_template("chatml");
    model_.tokenizer = tokenizer_.get();
    model_.chat_template = tokenizer::FindChatTemplate("chatml").value();
  }

  v1::GenerateRequest PromptRequest(const std::string& prompt) const {
    v1::GenerateRequest request;
    request.set_model("fake-model");
    request.set_prompt(prompt);
    return request;
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  ServedModel model_;
};

TEST_CASE_METHOD(ConversionFixture, "request conversion: unset sampling fields take the documented defaults",
                 "[unit][worker]") {
  auto converted = ToGenerationRequest(PromptRequest("hi"), model_);
  REQUIRE(converted.ok());
  CHECK(converted->prompt_token_ids == std::vector<int32_t>{'h', 'i'});
  const engine::SamplingOptions& options = converted->sampling;
  CHECK(options.max_tokens == kContext - 2);  // the rest of the context
  CHECK(options.min_tokens == 0);
  CHECK(options.temperature == 1.0f);
  CHECK(options.top_p == 1.0f);
  CHECK(options.top_k == 0);
  CHECK(options.min_p == 0.0f);
  CHECK(options.repetition_penalty == 1.0f);
  CHECK(options.presence_penalty == 0.0f);
  CHECK(options.frequency_penalty == 0.0f);
  CHECK(!options.seed.has_value());
  CHECK(options.n == 1);
  CHECK(options.skip_special_tokens);
  CHECK(!options.logprobs);
  CHECK(!options.ignore_eos);
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: set fields pass through; -1 top_k and 0 n read as vLLM does",
                 "[unit][worker]") {
  v1::GenerateRequest request = PromptRequest("hi");
  v1::SamplingParams& params = *request.mutable_sampling();
  params.set_max_tokens(7);
  params.set_min_tokens(2);
  params.set_temperature(0);
  params.set_top_p(0.5f);
  params.set_top_k(-1);
  params.set_min_p(0.1f);
  params.set_repetition_penalty(1.2f);
  params.set_presence_penalty(-2);
  params.set_frequency_penalty(2);
  params.set_seed(42);
  params.add_stop("\n\n");
  params.add_stop_token_ids(kImEnd);
  params.set_logprobs(true);
  params.set_top_logprobs(20);
  params.set_prompt_logprobs(20);
  params.set_n(0);
  params.set_skip_special_tokens(false);
  params.set_include_stop_str_in_output(true);
  params.set_ignore_eos(true);
  auto converted = ToGenerationRequest(request, model_);
  REQUIRE(converted.ok());
  const engine::SamplingOptions& options = converted->sampling;
  CHECK(options.max_tokens == 7);
  CHECK(options.min_tokens == 2);
  CHECK(options.greedy());
  CHECK(options.top_p == 0.5f);
  CHECK(options.top_k == 0);
  CHECK(options.min_p == 0.1f);
  CHECK(options.repetition_penalty == 1.2f);
  CHECK(options.presence_penalty == -2.0f);
  CHECK(options.frequency_penalty == 2.0f);
  CHECK(options.seed == 42u);
  CHECK(options.stop == std::vector<std::string>{"\n\n"});
  CHECK(options.stop_token_ids == std::vector<int32_t>{kImEnd});
  CHECK(options.logprobs);
  CHECK(options.top_logprobs == 20);
  CHECK(options.prompt_logprobs == 20u);
  CHECK(options.n == 1);
  CHECK(!options.skip_special_tokens);
  CHECK(options.include_stop_str_in_output);
  CHECK(options.ignore_eos);
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: every refused sampling value names its field",
                 "[unit][worker]") {
  struct Case {
    const char* field;
    std::function<void(v1::SamplingParams&)> set;
  };
  const Case cases[] = {
      {"sampling.temperature", [](auto& p) { p.set_temperature(-0.5f); }},
      {"sampling.temperature", [](auto& p) { p.set_temperature(101); }},
      {"sampling.temperature", [](auto& p) { p.set_temperature(std::nanf("")); }},
      {"sampling.top_p", [](auto& p) { p.set_top_p(0); }},
      {"sampling.top_p", [](auto& p) { p.set_top_p(1.5f); }},
      {"sampling.top_k", [](auto& p) { p.set_top_k(-2); }},
      {"sampling.min_p", [](auto& p) { p.set_min_p(-0.1f); }},
      {"sampling.min_p", [](auto& p) { p.set_min_p(1.1f); }},
      {"sampling.repetition_penalty", [](auto& p) { p.set_repetition_penalty(0); }},
      {"sampling.presence_penalty", [](auto& p) { p.set_presence_penalty(2.5f); }},
      {"sampling.frequency_penalty", [](auto& p) { p.set_frequency_penalty(-3); }},
      {"sampling.top_logprobs",
       [](auto& p) {
         p.set_logprobs(true);
         p.set_top_logprobs(21);
       }},
      {"sampling.top_logprobs", [](auto& p) { p.set_top_logprobs(3); }},  // without logprobs
      {"sampling.prompt_logprobs", [](auto& p) { p.set_prompt_logprobs(21); }},
      {"sampling.n", [](auto& p) { p.set_n(17); }},
      {"sampling.max_tokens", [](auto& p) { p.set_max_tokens(0); }},
      {"sampling.max_tokens", [](auto& p) { p.set_max_tokens(kContext); }},  // beyond the context
      {"sampling.min_tokens",
       [](auto& p) {
         p.set_max_tokens(4);
         p.set_min_tokens(5);
       }},
      {"sampling.stop[1]",
       [](auto& p) {
         p.add_stop("x");
         p.add_stop("");
       }},
      {"sampling.stop_token_ids[0]", [](auto& p) { p.add_stop_token_ids(300); }},
      {"sampling.length_penalty", [](auto& p) { p.set_length_penalty(0.5f); }},  // without beam search
      {"sampling.early_stopping", [](auto& p) { p.set_early_stopping(v1::BEAM_EARLY_STOPPING_WHEN_FULL); }},
      {"sampling.beam_width", [](auto& p) { p.set_beam_width(1); }},
      {"sampling.beam_width", [](auto& p) { p.set_beam_width(17); }},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = PromptRequest("hi");
    c.set(*request.mutable_sampling());
    auto converted = ToGenerationRequest(request, model_);
    INFO(request.sampling().ShortDebugString());
    REQUIRE_FALSE(converted.ok());
    CHECK(converted.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(converted.status().message()), Catch::Contains(c.field));
  }
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: beam search fields pass through and an unset temperature is 0",
                 "[unit][worker]") {
  v1::GenerateRequest request = PromptRequest("hi");
  v1::SamplingParams& params = *request.mutable_sampling();
  params.set_beam_width(4);
  params.set_n(2);
  params.set_length_penalty(-0.5f);
  params.set_early_stopping(v1::BEAM_EARLY_STOPPING_NEVER);
  params.set_top_p(1);
  params.set_top_k(-1);
  params.set_min_p(0);
  params.set_logprobs(true);
  auto converted = ToGenerationRequest(request, model_);
  REQUIRE(converted.ok());
  const engine::SamplingOptions& options = converted->sampling;
  CHECK(options.beam_search());
  CHECK(options.beam_width == 4);
  CHECK(options.n == 2);
  CHECK(options.length_penalty == -0.5f);
  CHECK(options.early_stopping == v1::BEAM_EARLY_STOPPING_NEVER);
  CHECK(options.greedy());
  CHECK(options.top_k == 0);
  CHECK(options.logprobs);

  // The defaults; n left at 0 reads as 1, which any beam width covers.
  v1::GenerateRequest plain = PromptRequest("hi");
  plain.mutable_sampling()->set_beam_width(16);
  plain.mutable_sampling()->set_temperature(0);
  converted = ToGenerationRequest(plain, model_);
  REQUIRE(converted.ok());
  CHECK(converted->sampling.beam_width == 16);
  CHECK(converted->sampling.n == 1);
  CHECK(converted->sampling.length_penalty == 1.0f);
  CHECK(converted->sampling.early_stopping == v1::BEAM_EARLY_STOPPING_HEURISTIC);

  // Without beam search the defaults may be spelled out.
  converted = ToGenerationRequest(PromptRequest("hi"), model_);
  REQUIRE(converted.ok());
  CHECK_FALSE(converted->sampling.beam_search());
  v1::GenerateRequest spelled_out = PromptRequest("hi");
  spelled_out.mutable_sampling()->set_length_penalty(1);
  spelled_out.mutable_sampling()->set_early_stopping(v1::BEAM_EARLY_STOPPING_HEURISTIC);
  CHECK(ToGenerationRequest(spelled_out, model_).ok());
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: the cache salt passes through, bounded", "[unit][worker]") {
  v1::GenerateRequest request = PromptRequest("hi");
  request.set_cache_salt("tenant");
  auto converted = ToGenerationRequest(request, model_);
  REQUIRE(converted.ok());
  CHECK(converted->cache_salt == "tenant");
  request.set_cache_salt(std::string(513, 's'));
  converted = ToGenerationRequest(request, model_);
  REQUIRE_FALSE(converted.ok());
  CHECK(converted.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(converted.status().message()), Catch::Contains("cache_salt"));
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: beam search refuses sampling and prompt logprobs",
                 "[unit][worker]") {
  struct Case {
    const char* field;
    std::function<void(v1::SamplingParams&)> set;
  };
  const Case cases[] = {
      {"sampling.n", [](auto& p) { p.set_n(5); }},
      {"sampling.temperature", [](auto& p) { p.set_temperature(0.7f); }},
      {"sampling.top_p", [](auto& p) { p.set_top_p(0.9f); }},
      {"sampling.top_k", [](auto& p) { p.set_top_k(40); }},
      {"sampling.min_p", [](auto& p) { p.set_min_p(0.1f); }},
      {"sampling.prompt_logprobs", [](auto& p) { p.set_prompt_logprobs(0); }},
      {"sampling.length_penalty", [](auto& p) { p.set_length_penalty(10.5f); }},
      {"sampling.length_penalty", [](auto& p) { p.set_length_penalty(std::nanf("")); }},
      {"sampling.early_stopping", [](auto& p) { p.set_early_stopping(static_cast<v1::BeamEarlyStopping>(7)); }},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = PromptRequest("hi");
    request.mutable_sampling()->set_beam_width(4);
    c.set(*request.mutable_sampling());
    auto converted = ToGenerationRequest(request, model_);
    INFO(request.sampling().ShortDebugString());
    REQUIRE_FALSE(converted.ok());
    CHECK(converted.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(converted.status().message()), Catch::Contains(c.field));
  }
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: the three prompt forms tokenize as documented",
                 "[unit][worker]") {
  v1::GenerateRequest ids = PromptRequest("");
  ids.mutable_prompt_token_ids()->add_ids(5);
  ids.mutable_prompt_token_ids()->add_ids(299);
  CHECK(PromptTokenIds(ids, model_).value() == std::vector<int32_t>{5, 299});

  // Special tokens written in a text prompt are recognised.
  CHECK(PromptTokenIds(PromptRequest("<|im_end|>a"), model_).value() == std::vector<int32_t>{kImEnd, 'a'});

  v1::GenerateRequest chat;
  v1::ChatMessage* message = chat.mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content("yo");
  const std::vector<int32_t> with_prompt = PromptTokenIds(chat, model_).value();
  const std::vector<int32_t> expected =
      tokenizer_->Encode("<|im_start|>user\nyo<|im_end|>\n<|im_start|>assistant\n").value();
  CHECK(with_prompt == expected);
  CHECK(with_prompt.front() == kImStart);
  chat.mutable_chat()->set_add_generation_prompt(false);
  CHECK(PromptTokenIds(chat, model_).value().size() ==
        with_prompt.size() - tokenizer_->Encode("<|im_start|>assistant\n").value().size());
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: bad prompts are INVALID_ARGUMENT naming the problem",
                 "[unit][worker]") {
  auto refused = [&](const v1::GenerateRequest& request) {
    absl::StatusOr<engine::GenerationRequest> converted = ToGenerationRequest(request, model_);
    REQUIRE_FALSE(converted.ok());
    CHECK(converted.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(converted.status().message());
  };
  v1::GenerateRequest none;
  CHECK_THAT(refused(none), Catch::Contains("prompt, prompt_token_ids or chat"));
  CHECK_THAT(refused(PromptRequest("")), Catch::Contains("prompt is empty"));
  CHECK_THAT(refused(PromptRequest("ok \xC3\x28")), Catch::Contains("prompt") && Catch::Contains("UTF-8"));

  v1::GenerateRequest ids = PromptRequest("");
  ids.mutable_prompt_token_ids()->add_ids(1);
  ids.mutable_prompt_token_ids()->add_ids(300);
  CHECK_THAT(refused(ids), Catch::Contains("prompt_token_ids[1] = 300"));
  ids.mutable_prompt_token_ids()->set_ids(1, -1);
  CHECK_THAT(refused(ids), Catch::Contains("prompt_token_ids[1] = -1"));

  v1::GenerateRequest chat;
  v1::ChatMessage* message = chat.mutable_chat()->add_messages();
  message->set_role("robot");
  message->set_content("beep");
  CHECK_THAT(refused(chat), Catch::Contains("chat") && Catch::Contains("messages[0].role"));
  chat.mutable_chat()->clear_messages();
  CHECK_THAT(refused(chat), Catch::Contains("messages must not be empty"));

  ServedModel no_template = model_;
  no_template.chat_template = nullptr;
  message = chat.mutable_chat()->add_messages();
  message->set_role("user");
  auto converted = ToGenerationRequest(chat, no_template);
  REQUIRE_FALSE(converted.ok());
  CHECK_THAT(std::string(converted.status().message()), Catch::Contains("no chat template"));

  // A prompt that fills the whole context leaves no room for a completion.
  CHECK_THAT(refused(PromptRequest(std::string(kContext, 'x'))), Catch::Contains("context length"));
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: another model's name is NOT_FOUND naming the served one",
                 "[unit][worker]") {
  v1::GenerateRequest request = PromptRequest("hi");
  request.set_model("gpt-4");
  auto converted = ToGenerationRequest(request, model_);
  REQUIRE_FALSE(converted.ok());
  CHECK(converted.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(converted.status().message()), Catch::Contains("gpt-4") && Catch::Contains("fake-model"));
  request.set_model("");  // one model per worker: empty means that one
  CHECK(ToGenerationRequest(request, model_).ok());
}

TEST_CASE_METHOD(ConversionFixture, "request conversion: tokenize counts like Generate and detokenize skips specials",
                 "[unit][worker]") {
  v1::TokenizeRequest tokenize;
  tokenize.set_model("fake-model");
  tokenize.set_text("abc<|endoftext|>");
  v1::TokenizeResponse tokens = Tokenize(tokenize, model_).value();
  CHECK(tokens.token_ids().size() == 4);
  CHECK(tokens.count() == 4);
  CHECK(tokens.max_context_length() == kContext);
  tokenize.set_count_only(true);
  tokens = Tokenize(tokenize, model_).value();
  CHECK(tokens.token_ids().empty());
  CHECK(tokens.count() == 4);

  v1::TokenizeRequest chat;
  v1::ChatMessage* message = chat.mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content("yo");
  v1::GenerateRequest generate;
  *generate.mutable_chat() = chat.chat();
  CHECK(Tokenize(chat, model_).value().count() == PromptTokenIds(generate, model_).value().size());

  v1::DetokenizeRequest detokenize;
  detokenize.add_token_ids('o');
  detokenize.add_token_ids('k');
  detokenize.add_token_ids(testing::kEndOfText);
  CHECK(Detokenize(detokenize, model_).value().text() == "ok");
  detokenize.set_skip_special_tokens(false);
  CHECK(Detokenize(detokenize, model_).value().text() == "ok<|endoftext|>");
  detokenize.add_token_ids(100000);
  auto refused = Detokenize(detokenize, model_);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("token_ids"));

  tokenize.set_model("other");
  CHECK(Tokenize(tokenize, model_).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace llmc::worker
