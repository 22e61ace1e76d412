// Structured output in the engine with a random-weight model and the real Qwen3 vocabulary: whatever the
// weights, every answer the grammar lets finish matches it (regex, choice, JSON Schema), preemption and
// prefix-cache hits change no token, and logit_bias, allowed_token_ids and bad_words hold.
#include <algorithm>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/collecting_sink.h"
#include "tests/support/model_scenario.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "worker/engine/engine.h"
#include "worker/service/constraint_compiler.h"

namespace llmc::engine {
namespace {

using testing::CollectingSink;
using testing::SubmitCollecting;

constexpr int32_t kSmallModelEos = 151645;  // <|im_end|>, the small package's EOS

const tokenizer::Tokenizer& SmallModelTokenizer() {
  static const std::unique_ptr<tokenizer::Tokenizer> tokenizer =
      tokenizer::Tokenizer::FromFile(testing::SmallModelPackage() + "/tokenizer.json").value();
  return *tokenizer;
}

worker::ConstraintCompiler& Compiler() {
  static worker::ConstraintCompiler* compiler = new worker::ConstraintCompiler(SmallModelTokenizer(), {kSmallModelEos});
  return *compiler;
}

EngineOptions ConstrainedOptions(int64_t kv_cache_bytes = 64 << 20, bool prefix_caching = false) {
  EngineOptions options;
  options.kv_cache_bytes = kv_cache_bytes;
  options.max_num_batched_tokens = 64;
  options.max_running = 8;
  options.max_waiting = 64;
  options.enable_prefix_caching = prefix_caching;
  return options;
}

std::unique_ptr<Engine> StartConstrainedEngine(const EngineOptions& options) {
  auto model = model::LoadedModel::Load(testing::SmallModelPackage(), {"cpu", ""});
  REQUIRE(model.ok());
  auto engine = Engine::Create(std::move(*model), SmallModelTokenizer(), options);
  REQUIRE(engine.ok());
  REQUIRE((*engine)->Start().ok());
  return std::move(*engine);
}

OutputConstraint Compile(v1::OutputConstraint constraint) {
  absl::StatusOr<OutputConstraint> compiled = Compiler().CompileNow(constraint);
  INFO(compiled.status().ToString());
  REQUIRE(compiled.ok());
  return *std::move(compiled);
}

OutputConstraint Regex(const std::string& pattern) {
  v1::OutputConstraint constraint;
  constraint.set_regex(pattern);
  return Compile(constraint);
}

GenerationRequest TextRequest(const std::string& prompt, uint32_t max_tokens, float temperature, uint32_t n = 1,
                              uint64_t seed = 1) {
  GenerationRequest request;
  request.request_id = "constrained";
  request.prompt_token_ids = SmallModelTokenizer().Encode(prompt).value();
  request.sampling.max_tokens = max_tokens;
  request.sampling.temperature = temperature;
  request.sampling.n = n;
  request.sampling.seed = seed;
  return request;
}

GenerationRequest Constrained(GenerationRequest request, OutputConstraint constraint) {
  request.constraint = std::move(constraint);
  request.sampling.constrained = true;
  return request;
}

std::shared_ptr<CollectingSink> SubmitAndWait(Engine& engine, GenerationRequest request) {
  auto sink = SubmitCollecting(engine, std::move(request));
  REQUIRE(sink->WaitDone());
  REQUIRE(sink->status().ok());
  return sink;
}

bool WaitUntilDrained(Engine& engine) {
  return testing::WaitUntil(
      [&] {
        const EngineLoad load = engine.Load();
        return engine.NumUnfinished() == 0 && load.num_running == 0 && load.num_kv_blocks_used == 0;
      },
      absl::Seconds(30));
}

TEST_CASE("constrained engine: every finished answer matches its regular expression", "[integration][grammar]") {
  auto engine = StartConstrainedEngine(ConstrainedOptions());
  const std::string pattern = "[a-z]{2,6}-[0-9]{3}( [A-Z][a-z]{1,8}){0,2}";
  const std::regex oracle(pattern);
  int finished = 0;
  for (const float temperature : {0.0f, 1.0f}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      auto sink =
          SubmitAndWait(*engine, Constrained(TextRequest("Make up a code:", 40, temperature, 3, seed), Regex(pattern)));
      for (uint32_t c = 0; c < 3; ++c) {
        const CollectingSink::Choice choice = sink->choice(c);
        INFO("choice text '" << choice.text << "'");
        // The pattern is finite, so no answer can need more than 40 tokens.
        REQUIRE(choice.finish_reason == v1::FINISH_REASON_STOP);
        CHECK(std::regex_match(choice.text, oracle));
        ++finished;
      }
      if (temperature == 0.0f) break;  // greedy choices are all alike
    }
  }
  CHECK(finished == 15);
  CHECK(WaitUntilDrained(*engine));
}

TEST_CASE("constrained engine: a choice list gives one of its strings", "[integration][grammar]") {
  auto engine = StartConstrainedEngine(ConstrainedOptions());
  v1::OutputConstraint constraint;
  for (const char* choice : {"positive", "negative", "neutral", "mixed feelings"}) {
    constraint.mutable_choice()->add_choices(choice);
  }
  const OutputConstraint compiled = Compile(constraint);
  auto sink = SubmitAndWait(*engine, Constrained(TextRequest("Sentiment:", 16, 1.0f, 8, 3), compiled));
  for (uint32_t c = 0; c < 8; ++c) {
    const std::string text = sink->choice(c).text;
    INFO(text);
    CHECK(sink->choice(c).finish_reason == v1::FINISH_REASON_STOP);
    CHECK((text == "positive" || text == "negative" || text == "neutral" || text == "mixed feelings"));
  }
}

TEST_CASE("constrained engine: JSON Schema answers that finish parse and validate", "[integration][grammar]") {
  auto engine = StartConstrainedEngine(ConstrainedOptions());
  v1::OutputConstraint constraint;
  constraint.set_json_schema(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":12},
      "age":{"type":"integer","minimum":0,"maximum":120},
      "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},
    "required":["name","age","tags"],"additionalProperties":false})");
  const OutputConstraint compiled = Compile(constraint);
  int finished = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto sink = SubmitAndWait(*engine, Constrained(TextRequest("A person as JSON:", 80, 1.0f, 4, seed), compiled));
    for (uint32_t c = 0; c < 4; ++c) {
      const CollectingSink::Choice choice = sink->choice(c);
      INFO(choice.text);
      if (choice.finish_reason != v1::FINISH_REASON_STOP) continue;
      ++finished;
      const nlohmann::json value = nlohmann::json::parse(choice.text);
      REQUIRE(value.is_object());
      CHECK(value.size() == 3);
      REQUIRE(value["name"].is_string());
      CHECK(value["name"].get<std::string>().size() <= 12 * 4);
      REQUIRE(value["age"].is_number_integer());
      CHECK(value["age"].get<int64_t>() >= 0);
      CHECK(value["age"].get<int64_t>() <= 120);
      REQUIRE(value["tags"].is_array());
      CHECK(value["tags"].size() <= 3);
      for (const auto& tag : value["tags"]) CHECK((tag == "a" || tag == "b" || tag == "c"));
    }
  }
  CHECK(finished > 0);
}

TEST_CASE("constrained engine: preemption and prefix-cache hits mid-grammar change no token",
          "[integration][grammar]") {
  const OutputConstraint compiled = Regex("\\{\"id\":[0-9]{1,4},\"word\":\"[a-z ]{0,80}\"\\}");
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) {
    // Prompts of several full blocks, so that a second run finds them cached.
    const std::string prompt =
        "Here is a list of items that a shop keeps in its back room, each written as one "
        "small JSON object with an id and a word describing it. Item number " +
        std::to_string(i) + " of the list, as JSON, is:";
    requests.push_back(Constrained(TextRequest(prompt, 48, i % 2 == 0 ? 0.0f : 1.0f, 1, 10 + i), compiled));
  }
  std::vector<std::vector<int32_t>> alone;
  {
    auto engine = StartConstrainedEngine(ConstrainedOptions());
    for (const GenerationRequest& request : requests)
      alone.push_back(SubmitAndWait(*engine, request)->choice(0).tokens);
  }
  SECTION("preemption") {
    auto probe = model::LoadedModel::Load(testing::SmallModelPackage(), {"cpu", ""});
    REQUIRE(probe.ok());
    auto engine = StartConstrainedEngine(ConstrainedOptions(6 * (*probe)->KvCacheBlockBytes(16)));
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (const GenerationRequest& request : requests) sinks.push_back(SubmitCollecting(*engine, request));
    for (size_t i = 0; i < sinks.size(); ++i) {
      REQUIRE(sinks[i]->WaitDone());
      REQUIRE(sinks[i]->status().ok());
      CHECK(sinks[i]->choice(0).tokens == alone[i]);
    }
    CHECK(engine->Load().num_preemptions > 0);
  }
  SECTION("prefix cache hits") {
    auto engine = StartConstrainedEngine(ConstrainedOptions(64 << 20, /*prefix_caching=*/true));
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < requests.size(); ++i) {
        auto sink = SubmitAndWait(*engine, requests[i]);
        CHECK(sink->choice(0).tokens == alone[i]);
        if (round == 1) CHECK(sink->usage().cached_prompt_tokens() > 0);
      }
    }
  }
}

TEST_CASE("constrained engine: greedy rows masked in the LM head pick what the full-row path picks",
          "[integration][grammar]") {
  {
    // The CPU kernels with packed weights apply masks in the LM head; otherwise this compares a path to itself.
    auto probe = model::LoadedModel::Load(testing::SmallModelPackage(), {"cpu", ""});
    REQUIRE(probe.ok());
    REQUIRE((*probe)->masks_logits_in_pass());
  }
  auto engine = StartConstrainedEngine(ConstrainedOptions());
  v1::OutputConstraint schema;
  schema.set_json_schema(R"({"type":"object","properties":{"city":{"type":"string","maxLength":20},
      "days":{"type":"integer","minimum":1,"maximum":14},"rain":{"type":"boolean"}},"required":["city","days"]})");
  const OutputConstraint compiled = Compile(schema);
  for (const std::string& prompt :
       {std::string("Weather report:"), std::string("Plan a trip, as JSON."), std::string("{\"city\":")}) {
    // Greedy with a mask takes the LM head's in-pass top logit of the allowed tokens; asking for logprobs
    // makes the same row take its full logits and the sampler's mask instead.
    GenerationRequest in_pass = Constrained(TextRequest(prompt, 40, 0.0f), compiled);
    GenerationRequest full_row = in_pass;
    full_row.sampling.logprobs = true;
    std::vector<int32_t> allowed_ids = SmallModelTokenizer().Encode("{}\"cityday:raintruefalse 0123456789,").value();
    GenerationRequest restricted = TextRequest(prompt, 12, 0.0f);
    restricted.sampling.ignore_eos = true;
    restricted.sampling.allowed_token_mask.assign((151936 + 63) / 64, 0);
    for (const int32_t id : allowed_ids) restricted.sampling.allowed_token_mask[id >> 6] |= uint64_t{1} << (id & 63);
    GenerationRequest restricted_full = restricted;
    restricted_full.sampling.logprobs = true;
    INFO(prompt);
    CHECK(SubmitAndWait(*engine, in_pass)->choice(0).tokens == SubmitAndWait(*engine, full_row)->choice(0).tokens);
    CHECK(SubmitAndWait(*engine, restricted)->choice(0).tokens ==
          SubmitAndWait(*engine, restricted_full)->choice(0).tokens);
  }
}

// allowed_token_ids of the end token alone with min_tokens (which suppresses it), and a word that is both the
// only allowed token and banned.
void GrammarlessNothingLeft(Engine& engine) {
  const int32_t word = SmallModelTokenizer().Encode(" banana").value().front();
  GenerationRequest only_eos = TextRequest("The weather today is", 8, 1.0f);
  only_eos.sampling.min_tokens = 2;
  only_eos.sampling.allowed_token_mask.assign((151936 + 63) / 64, 0);
  only_eos.sampling.allowed_token_mask[kSmallModelEos >> 6] |= uint64_t{1} << (kSmallModelEos & 63);
  GenerationRequest banned_only = TextRequest("The weather today is", 8, 1.0f);
  banned_only.sampling.allowed_token_mask.assign((151936 + 63) / 64, 0);
  banned_only.sampling.allowed_token_mask[word >> 6] |= uint64_t{1} << (word & 63);
  banned_only.sampling.bad_words = {{word}};
  for (const GenerationRequest& request : {only_eos, banned_only}) {
    const CollectingSink::Choice choice = SubmitAndWait(engine, request)->choice(0);
    CHECK(choice.finish_reason == v1::FINISH_REASON_STOP);
    CHECK(choice.text.empty());
    CHECK(choice.tokens.size() == 1);
  }
}

TEST_CASE("constrained engine: logit_bias bans and forces, allowed_token_ids restricts, bad_words never appear",
          "[integration][grammar]") {
  auto engine = StartConstrainedEngine(ConstrainedOptions());
  GenerationRequest plain = TextRequest("The weather today is", 12, 0.0f);
  plain.sampling.ignore_eos = true;
  const std::vector<int32_t> unbiased = SubmitAndWait(*engine, plain)->choice(0).tokens;
  REQUIRE(unbiased.size() == 12);

  GenerationRequest banned = plain;
  banned.sampling.logit_bias = {{unbiased[0], -100.0f}};
  CHECK(SubmitAndWait(*engine, banned)->choice(0).tokens[0] != unbiased[0]);

  const int32_t forced_token = SmallModelTokenizer().Encode(" banana").value().front();
  GenerationRequest forced = TextRequest("The weather today is", 6, 1.0f, 2, 5);
  forced.sampling.ignore_eos = true;
  forced.sampling.logit_bias = {{forced_token, 100.0f}};
  auto forced_sink = SubmitAndWait(*engine, forced);
  for (uint32_t c = 0; c < 2; ++c) {
    CHECK(forced_sink->choice(c).tokens == std::vector<int32_t>(6, forced_token));
  }

  const std::vector<int32_t> allowed_ids = SmallModelTokenizer().Encode(" sunny cloudy rain").value();
  GenerationRequest allowed = TextRequest("The weather today is", 10, 1.0f, 3, 9);
  allowed.sampling.ignore_eos = true;
  allowed.sampling.allowed_token_mask.assign((151936 + 63) / 64, 0);
  for (const int32_t id : allowed_ids) allowed.sampling.allowed_token_mask[id >> 6] |= uint64_t{1} << (id & 63);
  auto allowed_sink = SubmitAndWait(*engine, allowed);
  for (uint32_t c = 0; c < 3; ++c) {
    for (const int32_t token : allowed_sink->choice(c).tokens) {
      CHECK(std::find(allowed_ids.begin(), allowed_ids.end(), token) != allowed_ids.end());
    }
  }

  // Ban the two-token sequence greedy decoding produced at its start: its second token may no longer follow.
  GenerationRequest bad = plain;
  bad.sampling.bad_words = {{unbiased[0], unbiased[1]}};
  const std::vector<int32_t> without = SubmitAndWait(*engine, bad)->choice(0).tokens;
  for (size_t i = 0; i + 1 < without.size(); ++i) {
    CHECK_FALSE((without[i] == unbiased[0] && without[i + 1] == unbiased[1]));
  }
  CHECK(without[0] == unbiased[0]);
  CHECK(without[1] != unbiased[1]);

  // Restrictions that leave nothing to draw end the answer, with no text from a token they do not allow.
  GrammarlessNothingLeft(*engine);
}

}  // namespace
}  // namespace llmc::engine
