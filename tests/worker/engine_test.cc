// The continuous-batching engine with a tiny random model against the full-recompute reference
// (tests/python/make_parity_fixture.py): batch invariance, preemption, cancellation, admission limits,
// stop conditions, seeds and logprobs.
#include "worker/engine/engine.h"

#include <ATen/ATen.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/fault_injection.h"
#include "tests/support/catch.h"
#include "tests/support/collecting_sink.h"
#include "tests/support/model_scenario.h"
#include "tests/support/wait.h"

namespace llmc::engine {
namespace {

using testing::CollectingSink;
using testing::SmallParityEngineOptions;
using testing::ToIds;

constexpr uint32_t kReferenceSteps = 32;

const std::string& PackageDir() {
  static const std::string dir = testing::ParityFixture("float32") + "/package";
  return dir;
}

const testing::ModelReference& Reference() {
  static const testing::ModelReference reference = testing::LoadModelReference(testing::ParityFixture("float32"));
  return reference;
}

const tokenizer::Tokenizer& Tokenizer() {
  static const std::unique_ptr<tokenizer::Tokenizer> tokenizer =
      tokenizer::Tokenizer::FromFile(PackageDir() + "/tokenizer.json").value();
  return *tokenizer;
}

std::unique_ptr<Engine> StartEngine(const EngineOptions& options) {
  auto model = model::LoadedModel::Load(PackageDir(), {"cpu", ""});
  REQUIRE(model.ok());
  auto engine = Engine::Create(std::move(*model), Tokenizer(), options);
  REQUIRE(engine.ok());
  REQUIRE((*engine)->Start().ok());
  return std::move(*engine);
}

GenerationRequest Greedy(std::vector<int32_t> prompt, uint32_t max_tokens = kReferenceSteps) {
  GenerationRequest request;
  request.request_id = "test";
  request.prompt_token_ids = std::move(prompt);
  request.sampling.temperature = 0;
  request.sampling.max_tokens = max_tokens;
  request.sampling.ignore_eos = true;  // the reference runs 32 greedy steps whatever comes out
  return request;
}

std::shared_ptr<CollectingSink> Run(Engine& engine, GenerationRequest request) {
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(engine.Submit(std::move(request), sink).ok());
  REQUIRE(sink->WaitDone());
  REQUIRE(sink->status().ok());
  CHECK(sink->indices_contiguous());
  CHECK(sink->num_done_calls() == 1);
  return sink;
}

// Deterministic pseudo-random prompts of the model's vocabulary.
std::vector<int32_t> ExtraPrompt(int length, int seed) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back((seed * 131 + i * 71 + i * i * 7) % 500 + 5);
  return prompt;
}

// Turns fault points on for a scope, and off again even when a REQUIRE leaves it early.
class ScopedFaults {
 public:
  explicit ScopedFaults(absl::string_view spec) { SetFaultInjectionForTesting(spec); }
  ~ScopedFaults() { SetFaultInjectionForTesting(""); }
};

bool WaitForIdle(Engine& engine) {
  return testing::WaitUntil(
      [&] {
        const EngineLoad load = engine.Load();
        return engine.NumUnfinished() == 0 && load.num_running == 0 && load.num_waiting == 0 &&
               load.num_kv_blocks_used == 0;
      },
      absl::Seconds(10));
}

TEST_CASE("engine: greedy output equals the reference alone and inside a staggered batch of 8",
          "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  const auto& reference = Reference();
  std::vector<std::vector<int32_t>> alone;
  for (size_t s = 0; s < reference.prompts.size(); ++s) {
    const auto sink = Run(*engine, Greedy(ToIds(reference.prompts[s])));
    INFO("sequence " << s);
    CHECK(sink->choice(0).tokens == ToIds(reference.continuations[s]));
    CHECK(sink->choice(0).finish_reason == v1::FINISH_REASON_LENGTH);
    CHECK(sink->usage().prompt_tokens() == reference.prompts[s].numel());
    CHECK(sink->usage().completion_tokens() == kReferenceSteps);
  }
  for (int e = 0; e < 4; ++e) alone.push_back(Run(*engine, Greedy(ExtraPrompt(3 + 11 * e, e)))->choice(0).tokens);

  // Eight requests of different lengths: four at once, the rest arriving while the first ones decode.
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  const auto submit = [&](GenerationRequest request) {
    sinks.push_back(std::make_shared<CollectingSink>());
    REQUIRE(engine->Submit(std::move(request), sinks.back()).ok());
  };
  submit(Greedy(ToIds(reference.prompts[3])));
  submit(Greedy(ExtraPrompt(3, 0)));
  submit(Greedy(ToIds(reference.prompts[0])));
  submit(Greedy(ExtraPrompt(14, 1)));
  REQUIRE(testing::WaitUntil([&] { return sinks[1]->choice(0).tokens.size() >= 4; }, absl::Seconds(30)));
  submit(Greedy(ToIds(reference.prompts[2])));
  submit(Greedy(ExtraPrompt(25, 2)));
  REQUIRE(testing::WaitUntil([&] { return sinks[4]->choice(0).tokens.size() >= 2; }, absl::Seconds(30)));
  submit(Greedy(ToIds(reference.prompts[1])));
  submit(Greedy(ExtraPrompt(36, 3)));
  for (auto& sink : sinks) {
    REQUIRE(sink->WaitDone());
    REQUIRE(sink->status().ok());
    CHECK(sink->indices_contiguous());
  }
  CHECK(sinks[0]->choice(0).tokens == ToIds(reference.continuations[3]));
  CHECK(sinks[2]->choice(0).tokens == ToIds(reference.continuations[0]));
  CHECK(sinks[4]->choice(0).tokens == ToIds(reference.continuations[2]));
  CHECK(sinks[6]->choice(0).tokens == ToIds(reference.continuations[1]));
  CHECK(sinks[1]->choice(0).tokens == alone[0]);
  CHECK(sinks[3]->choice(0).tokens == alone[1]);
  CHECK(sinks[5]->choice(0).tokens == alone[2]);
  CHECK(sinks[7]->choice(0).tokens == alone[3]);
  CHECK(WaitForIdle(*engine));
}

TEST_CASE("engine: a KV budget that forces preemption leaves outputs unchanged", "[integration][engine]") {
  EngineOptions options = SmallParityEngineOptions();
  auto probe = model::LoadedModel::Load(PackageDir(), {"cpu", ""});
  REQUIRE(probe.ok());
  // 14 blocks of 16 tokens; the four sequences need 1 + 3 + 5 + 5 blocks at the end, and more with n = 2.
  options.kv_cache_bytes = 14 * (*probe)->KvCacheBlockBytes(options.block_size);
  auto engine = StartEngine(options);
  const auto& reference = Reference();
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int round = 0; round < 2; ++round) {
    for (size_t s = 0; s < reference.prompts.size(); ++s) {
      sinks.push_back(std::make_shared<CollectingSink>());
      REQUIRE(engine->Submit(Greedy(ToIds(reference.prompts[s])), sinks.back()).ok());
    }
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    REQUIRE(sinks[i]->WaitDone());
    REQUIRE(sinks[i]->status().ok());
    INFO("request " << i);
    CHECK(sinks[i]->choice(0).tokens == ToIds(reference.continuations[i % reference.prompts.size()]));
  }
  CHECK(engine->Load().num_preemptions > 0);
  CHECK(engine->Load().num_kv_blocks == 14);
  CHECK(WaitForIdle(*engine));
}

TEST_CASE("engine: the load reports how fast it computes prompt tokens, and keeps it while idle",
          "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  CHECK(engine->Load().prefill_tokens_per_second == 0);  // nothing prefilled yet
  Run(*engine, Greedy(ExtraPrompt(40, 7), 2));
  REQUIRE(WaitForIdle(*engine));
  const double rate = engine->Load().prefill_tokens_per_second;
  CHECK(rate > 0);
  CHECK(std::isfinite(rate));
  // A speed, not recent traffic: idle time does not lower it.
  absl::SleepFor(absl::Milliseconds(50));
  CHECK(engine->Load().prefill_tokens_per_second == rate);
}

TEST_CASE("engine: cancelling mid-stream frees every KV block", "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  auto sink = std::make_shared<CollectingSink>();
  auto id = engine->Submit(Greedy(ToIds(Reference().prompts[3]), 1000), sink);
  REQUIRE(id.ok());
  REQUIRE(testing::WaitUntil([&] { return sink->choice(0).tokens.size() >= 3; }, absl::Seconds(30)));
  CHECK(engine->Load().num_kv_blocks_used > 0);
  engine->Abort(*id);
  REQUIRE(sink->WaitDone());
  CHECK(sink->status().code() == absl::StatusCode::kCancelled);
  CHECK(sink->choice(0).tokens.size() < 1000);
  CHECK(WaitForIdle(*engine));
  engine->Abort(*id);  // already gone: ignored
  CHECK(Run(*engine, Greedy(ToIds(Reference().prompts[0])))->choice(0).tokens == ToIds(Reference().continuations[0]));
}

TEST_CASE("engine: a request past its deadline ends with DEADLINE_EXCEEDED and frees its blocks",
          "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  // Four choices of 2000 tokens each: far more work than 100 ms holds even on a fast machine (one choice of
  // this tiny model once ran its 2000 tokens inside 300 ms).
  GenerationRequest request = Greedy(ToIds(Reference().prompts[3]), 2000);
  request.sampling.n = 4;
  request.deadline = absl::Now() + absl::Milliseconds(100);
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(std::move(request), sink).ok());
  REQUIRE(sink->WaitDone());
  CHECK(sink->status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(sink->choice(0).tokens.size() < 2000);
  CHECK(WaitForIdle(*engine));
}

TEST_CASE("engine: admission limits and bad requests are refused at once", "[integration][engine]") {
  EngineOptions options = SmallParityEngineOptions();
  options.max_running = 1;
  options.max_waiting = 2;
  auto engine = StartEngine(options);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    auto id = engine->Submit(Greedy(ExtraPrompt(4, i), 1500), sinks.back());
    REQUIRE(id.ok());
    ids.push_back(*id);
    // The first must be running before the next arrive, so exactly two wait.
    if (i == 0) REQUIRE(testing::WaitUntil([&] { return engine->Load().num_running == 1; }, absl::Seconds(30)));
  }
  auto refused = engine->Submit(Greedy(ExtraPrompt(4, 9), 8), std::make_shared<CollectingSink>());
  CHECK(refused.status().code() == absl::StatusCode::kResourceExhausted);
  // Admission counts a request as it arrives; the load snapshot, once the engine thread has taken it in.
  CHECK(testing::WaitUntil([&] { return engine->Load().num_waiting == 2; }, absl::Seconds(30)));

  auto too_long = engine->Submit(Greedy(ExtraPrompt(2000, 1), 100), std::make_shared<CollectingSink>());
  REQUIRE(too_long.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(too_long.status().message()),
             Catch::Contains("2048") && Catch::Contains("2100") && Catch::Contains("2000"));
  CHECK(engine->Submit(Greedy({}), std::make_shared<CollectingSink>()).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(engine->Submit(Greedy({1, 512}), std::make_shared<CollectingSink>()).status().code() ==
        absl::StatusCode::kInvalidArgument);

  for (const uint64_t id : ids) engine->Abort(id);
  for (auto& sink : sinks) {
    REQUIRE(sink->WaitDone());
    CHECK(sink->status().code() == absl::StatusCode::kCancelled);
  }
  CHECK(WaitForIdle(*engine));
  engine->StopAccepting();
  CHECK(engine->Submit(Greedy({1, 2}), std::make_shared<CollectingSink>()).status().code() ==
        absl::StatusCode::kUnavailable);
}

TEST_CASE("engine: an exception from the model step ends that step's requests with INTERNAL, not the engine",
          "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  auto failed = std::make_shared<CollectingSink>();
  {
    ScopedFaults faults("model_step_throw@1-1");
    REQUIRE(engine->Submit(Greedy(ToIds(Reference().prompts[0])), failed).ok());
    REQUIRE(failed->WaitDone());
  }
  CHECK(failed->status().code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(failed->status().message()), Catch::Contains("injected fault"));
  CHECK(WaitForIdle(*engine));
  CHECK(engine->Health().ok());
  CHECK(Run(*engine, Greedy(ToIds(Reference().prompts[0])))->choice(0).tokens == ToIds(Reference().continuations[0]));
}

TEST_CASE("engine: after max_consecutive_failed_steps failed steps the engine turns unhealthy and refuses requests",
          "[integration][engine]") {
  EngineOptions options = SmallParityEngineOptions();
  options.max_consecutive_failed_steps = 2;
  std::atomic<int> unhealthy_calls{0};
  auto model = model::LoadedModel::Load(PackageDir(), {"cpu", ""});
  REQUIRE(model.ok());
  auto created = Engine::Create(std::move(*model), Tokenizer(), options);
  REQUIRE(created.ok());
  std::unique_ptr<Engine> engine = std::move(*created);
  engine->SetUnhealthyListener([&unhealthy_calls](const absl::Status& status) {
    if (status.code() == absl::StatusCode::kInternal) ++unhealthy_calls;
  });
  REQUIRE(engine->Start().ok());
  {
    ScopedFaults faults("model_step");
    for (int i = 0; i < 2; ++i) {
      auto sink = std::make_shared<CollectingSink>();
      REQUIRE(engine->Submit(Greedy(ExtraPrompt(5, i), 4), sink).ok());
      REQUIRE(sink->WaitDone());
      CHECK(sink->status().code() == absl::StatusCode::kInternal);
      CHECK(sink->choice(0).tokens.empty());
    }
  }
  CHECK(engine->Health().code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(engine->Health().message()), Catch::Contains("2 model steps in a row failed"));
  CHECK(testing::WaitUntil([&] { return unhealthy_calls.load() == 1; }, absl::Seconds(5)));
  const auto refused = engine->Submit(Greedy(ExtraPrompt(5, 7), 4), std::make_shared<CollectingSink>());
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
  CHECK(WaitForIdle(*engine));
}

TEST_CASE("engine: stop token ids, stop strings and max_tokens end choices as specified", "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  const std::vector<int32_t> prompt = ToIds(Reference().prompts[2]);
  const std::vector<int32_t> full = ToIds(Reference().continuations[2]);

  SECTION("max_tokens") {
    const auto sink = Run(*engine, Greedy(prompt, 7));
    CHECK(sink->choice(0).tokens == std::vector<int32_t>(full.begin(), full.begin() + 7));
    CHECK(sink->choice(0).finish_reason == v1::FINISH_REASON_LENGTH);
    CHECK(sink->usage().completion_tokens() == 7);
  }
  SECTION("stop token id") {
    // The first token that did not come earlier (greedy output of a random model repeats itself a lot).
    size_t at = 1;
    while (at < full.size() && std::find(full.begin(), full.begin() + at, full[at]) != full.begin() + at) ++at;
    if (at == full.size()) at = 0;
    GenerationRequest request = Greedy(prompt);
    request.sampling.stop_token_ids = {full[at]};
    const auto sink = Run(*engine, request);
    CHECK(sink->choice(0).tokens == std::vector<int32_t>(full.begin(), full.begin() + at + 1));
    CHECK(sink->choice(0).finish_reason == v1::FINISH_REASON_STOP);
    CHECK(sink->choice(0).stop_reason == std::to_string(full[at]));
    CHECK(sink->choice(0).text == Tokenizer().Decode(std::vector<int32_t>(full.begin(), full.begin() + at)).value());
  }
  SECTION("min_tokens keeps a stop token id from ending the choice early") {
    GenerationRequest request = Greedy(prompt);
    request.sampling.stop_token_ids = {full[0]};
    request.sampling.min_tokens = 3;
    const auto choice = Run(*engine, request)->choice(0);
    REQUIRE(choice.tokens.size() > 3);
    CHECK(choice.tokens[0] != full[0]);
    // The stop id may end the choice from the fourth token on, and then only as its last token.
    const auto first_stop = std::find(choice.tokens.begin(), choice.tokens.end(), full[0]);
    CHECK(first_stop == choice.tokens.end() - (choice.finish_reason == v1::FINISH_REASON_STOP ? 1 : 0));
  }
  SECTION("stop string, never leaked") {
    const std::string text = Run(*engine, Greedy(prompt))->choice(0).text;
    REQUIRE(text.size() >= 12);
    // A stop string from the middle of the greedy text; the output is everything before its first occurrence.
    size_t from = text.size() / 2;
    while (from > 0 && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) --from;
    size_t length = 3;
    while (from + length < text.size() && (static_cast<unsigned char>(text[from + length]) & 0xC0) == 0x80) ++length;
    const std::string stop = text.substr(from, length);
    GenerationRequest request = Greedy(prompt);
    request.sampling.stop = {stop, "never-generated-xyz"};
    const auto sink = Run(*engine, request);
    CHECK(sink->choice(0).text == text.substr(0, text.find(stop)));
    CHECK(sink->choice(0).finish_reason == v1::FINISH_REASON_STOP);
    CHECK(sink->choice(0).stop_reason == stop);
    request.sampling.include_stop_str_in_output = true;
    CHECK(Run(*engine, request)->choice(0).text == text.substr(0, text.find(stop) + stop.size()));
  }
  SECTION("EOS ends the choice unless ignore_eos") {
    GenerationRequest request = Greedy(prompt);
    request.sampling.ignore_eos = false;
    const auto sink = Run(*engine, request);
    const auto eos = std::find(full.begin(), full.end(), 3);  // the fixture's EOS id
    CHECK(sink->choice(0).tokens == std::vector<int32_t>(full.begin(), eos == full.end() ? full.end() : eos + 1));
    CHECK(sink->choice(0).finish_reason == (eos == full.end() ? v1::FINISH_REASON_LENGTH : v1::FINISH_REASON_STOP));
  }
  CHECK(WaitForIdle(*engine));
}

TEST_CASE("engine: seeds reproduce samples, also inside a batch and across choices", "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  const auto sampled = [](uint64_t seed, uint32_t n) {
    GenerationRequest request = Greedy(ToIds(Reference().prompts[1]), 12);
    request.sampling.temperature = 1.0f;
    request.sampling.top_p = 0.95f;
    request.sampling.seed = seed;
    request.sampling.n = n;
    return request;
  };
  const auto first = Run(*engine, sampled(42, 1))->choice(0).tokens;
  CHECK(Run(*engine, sampled(42, 1))->choice(0).tokens == first);
  CHECK(Run(*engine, sampled(43, 1))->choice(0).tokens != first);

  // In a batch with other requests, and as choice 1 of a seeded n = 2 request (which samples from seed + 1).
  auto busy = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(Greedy(ExtraPrompt(30, 5), 40), busy).ok());
  auto pair = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(sampled(41, 2), pair).ok());
  auto again = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(sampled(42, 1), again).ok());
  for (auto* sink : {busy.get(), pair.get(), again.get()}) REQUIRE(sink->WaitDone());
  CHECK(again->choice(0).tokens == first);
  CHECK(pair->choice(1).tokens == first);
  CHECK(pair->choice(0).tokens != first);
  CHECK(pair->usage().completion_tokens() == 24);
  CHECK(pair->usage().prompt_tokens() == Reference().prompts[1].numel());
  CHECK(WaitForIdle(*engine));
}

TEST_CASE("engine: logprobs are the model's, with sorted alternatives", "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  GenerationRequest request = Greedy(ToIds(Reference().prompts[0]), 8);
  request.sampling.logprobs = true;
  request.sampling.top_logprobs = 3;
  const auto sink = Run(*engine, request);
  const auto choice = sink->choice(0);
  REQUIRE(choice.logprobs.size() == 8);
  for (size_t k = 0; k < choice.logprobs.size(); ++k) {
    const v1::TokenLogprob& entry = choice.logprobs[k];
    const at::Tensor expected = at::log_softmax(Reference().logits[0][static_cast<int64_t>(k)], -1);
    INFO("step " << k);
    CHECK(entry.token_id() == choice.tokens[k]);
    CHECK(entry.logprob() == Approx(expected[entry.token_id()].item<float>()).margin(1e-4));
    REQUIRE(entry.top_size() == 3);
    CHECK(entry.top(0).token_id() == entry.token_id());  // greedy picks the best
    CHECK(entry.top(0).logprob() >= entry.top(1).logprob());
    CHECK(entry.top(1).logprob() >= entry.top(2).logprob());
    CHECK(entry.top(2).logprob() == Approx(expected[entry.top(2).token_id()].item<float>()).margin(1e-4));
    CHECK(entry.token_bytes() == std::string(Tokenizer().TokenBytes(entry.token_id())));
  }
}

// Greedy and top-k rows are sampled from the top logits the LM head keeps in its pass; asking for logprobs
// gives the same request full float32 rows. In one batch, both ways must draw the same tokens.
TEST_CASE("engine: rows sampled from in-pass top logits draw what full rows draw", "[integration][engine]") {
  auto engine = StartEngine(SmallParityEngineOptions());
  const auto request = [](uint32_t variant, bool logprobs) {
    GenerationRequest r = Greedy(ToIds(Reference().prompts[variant % 2]), 16);
    if (variant >= 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 20;
      r.sampling.seed = 7 + variant;
    }
    if (variant == 2) {
      r.sampling.top_p = 0.8f;
      r.sampling.min_tokens = 5;  // EOS suppressed for 5 steps: those rows need full logits either way
    }
    r.sampling.logprobs = logprobs;
    return r;
  };
  std::vector<std::shared_ptr<CollectingSink>> in_pass, full;
  for (uint32_t variant = 0; variant < 3; ++variant) {
    in_pass.push_back(std::make_shared<CollectingSink>());
    full.push_back(std::make_shared<CollectingSink>());
    REQUIRE(engine->Submit(request(variant, false), in_pass.back()).ok());
    REQUIRE(engine->Submit(request(variant, true), full.back()).ok());
  }
  for (uint32_t variant = 0; variant < 3; ++variant) {
    REQUIRE(in_pass[variant]->WaitDone());
    REQUIRE(full[variant]->WaitDone());
    INFO("variant " << variant);
    CHECK(in_pass[variant]->choice(0).tokens.size() == 16);
    CHECK(in_pass[variant]->choice(0).tokens == full[variant]->choice(0).tokens);
    CHECK(full[variant]->choice(0).logprobs.size() == 16);
  }
  // Greedy through the in-pass path is the reference's greedy continuation.
  const std::vector<int32_t> continuation = ToIds(Reference().continuations[0]);
  CHECK(in_pass[0]->choice(0).tokens == std::vector<int32_t>(continuation.begin(), continuation.begin() + 16));
  CHECK(WaitForIdle(*engine));
}

}  // namespace
}  // namespace llmc::engine
