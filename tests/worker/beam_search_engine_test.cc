// Beam search in the continuous-batching engine against a brute-force reference: a plain beam search
// written here that scores every beam's next tokens with a fresh prefill of its whole sequence (its own
// engine request, no shared blocks, no forks, no prefix cache), with vLLM's rules for selection, finished
// beams, length penalty and early stopping. The engine's beams share KV blocks (forked, copied on write),
// advance in lockstep, survive preemption and run beside other requests; their results must be the same.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/collecting_sink.h"
#include "tests/support/model_scenario.h"
#include "worker/engine/beam_history.h"
#include "worker/engine/beam_search_action.h"
#include "worker/engine/engine.h"
#include "worker/model/loaded_model.h"

namespace llmc::engine {
namespace {

using testing::CollectingSink;

constexpr int32_t kEos = 3;  // the parity fixture's

std::unique_ptr<Engine> StartBeamEngine(bool prefix_caching, int64_t kv_cache_bytes = 64 << 20) {
  EngineOptions options;
  options.kv_cache_bytes = kv_cache_bytes;
  options.block_size = 16;
  options.max_num_batched_tokens = 64;
  options.max_running = 16;
  options.enable_prefix_caching = prefix_caching;
  return testing::StartParityEngine(testing::Float32ParityDir() + "/package", options);
}

std::vector<int32_t> BeamPrompt(int variant, int64_t length) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(static_cast<int32_t>((i * 53 + variant * 101 + 17) % 500 + 4));
  return ids;
}

struct BeamSettings {
  uint32_t width = 3;
  uint32_t n = 2;
  uint32_t max_tokens = 8;
  float length_penalty = 1.0f;
  v1::BeamEarlyStopping early_stopping = v1::BEAM_EARLY_STOPPING_HEURISTIC;
  std::vector<int32_t> stop_token_ids;
};

GenerationRequest BeamRequest(std::vector<int32_t> prompt, const BeamSettings& settings) {
  GenerationRequest request;
  request.request_id = "beam";
  request.prompt_token_ids = std::move(prompt);
  request.sampling.temperature = 0;
  request.sampling.max_tokens = settings.max_tokens;
  request.sampling.n = settings.n;
  request.sampling.beam_width = settings.width;
  request.sampling.length_penalty = settings.length_penalty;
  request.sampling.early_stopping = settings.early_stopping;
  request.sampling.stop_token_ids = settings.stop_token_ids;
  request.sampling.logprobs = true;
  return request;
}

// The model's likeliest `count` next tokens after `tokens` (id, logprob), best first, from a one-token
// request that prefills all of `tokens`.
std::vector<std::pair<int32_t, float>> NextTokens(Engine& oracle, const std::vector<int32_t>& tokens, uint32_t count) {
  GenerationRequest request;
  request.request_id = "oracle";
  request.prompt_token_ids = tokens;
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 1;
  request.sampling.ignore_eos = true;
  request.sampling.logprobs = true;
  request.sampling.top_logprobs = count;
  auto sink = testing::SubmitCollecting(oracle, std::move(request));
  REQUIRE(sink->WaitDone());
  REQUIRE(sink->status().ok());
  const CollectingSink::Choice choice = sink->choice(0);
  REQUIRE(choice.logprobs.size() == 1);
  std::vector<std::pair<int32_t, float>> next;
  for (const v1::TopLogprob& top : choice.logprobs[0].top()) next.emplace_back(top.token_id(), top.logprob());
  return next;
}

// Counts the first tokens the engine reports to its observer.
class FirstTokenCounter : public EngineObserver {
 public:
  void OnFirstToken(absl::Duration) override { ++first_tokens_; }
  int first_tokens() const { return first_tokens_; }

 private:
  std::atomic<int> first_tokens_{0};
};

struct ReferenceBeam {
  std::vector<int32_t> output;
  double cumulative = 0;
  double score = 0;
};

double Score(double cumulative, size_t length, bool ends_with_eos, float length_penalty) {
  return cumulative / std::pow(static_cast<double>(length - (ends_with_eos ? 1 : 0)), length_penalty);
}

// vLLM's beam search, step by step, every beam rescored from scratch.
std::vector<ReferenceBeam> ReferenceBeamSearch(Engine& oracle, const std::vector<int32_t>& prompt,
                                               const BeamSettings& settings, int64_t max_model_len) {
  const size_t width = settings.width;
  std::vector<ReferenceBeam> running = {ReferenceBeam{}}, finished;
  while (!running.empty()) {
    struct Candidate {
      const ReferenceBeam* parent;
      int32_t token;
      double cumulative;
    };
    std::vector<Candidate> candidates;
    for (const ReferenceBeam& beam : running) {
      std::vector<int32_t> tokens = prompt;
      tokens.insert(tokens.end(), beam.output.begin(), beam.output.end());
      for (const auto& [token, logprob] : NextTokens(oracle, tokens, 2 * settings.width)) {
        candidates.push_back({&beam, token, beam.cumulative + logprob});
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.cumulative > b.cumulative; });
    candidates.resize(std::min(candidates.size(), 2 * width));
    std::vector<ReferenceBeam> going_on;
    for (const Candidate& candidate : candidates) {
      ReferenceBeam child{candidate.parent->output, candidate.cumulative, 0};
      child.output.push_back(candidate.token);
      const bool eos = candidate.token == kEos;
      const bool stop_id = std::find(settings.stop_token_ids.begin(), settings.stop_token_ids.end(), candidate.token) !=
                           settings.stop_token_ids.end();
      if (eos || stop_id || child.output.size() >= settings.max_tokens) {
        child.score = Score(child.cumulative, prompt.size() + child.output.size(), eos, settings.length_penalty);
        finished.push_back(std::move(child));
      } else {
        going_on.push_back(std::move(child));
      }
    }
    std::stable_sort(finished.begin(), finished.end(),
                     [](const ReferenceBeam& a, const ReferenceBeam& b) { return a.score > b.score; });
    finished.resize(std::min(finished.size(), width));
    bool stop = going_on.empty();
    if (!stop && finished.size() >= width) {
      const ReferenceBeam& best = going_on.front();
      size_t length = prompt.size() + best.output.size();
      if (settings.early_stopping == v1::BEAM_EARLY_STOPPING_NEVER && settings.length_penalty > 0) {
        length = std::max<size_t>(length, std::min<size_t>(prompt.size() + settings.max_tokens, max_model_len));
      }
      stop = settings.early_stopping == v1::BEAM_EARLY_STOPPING_WHEN_FULL ||
             finished[width - 1].score >= Score(best.cumulative, length, false, settings.length_penalty);
    }
    running.clear();
    if (!stop) {
      going_on.resize(std::min(going_on.size(), width));
      running = std::move(going_on);
    }
  }
  finished.resize(std::min<size_t>(finished.size(), settings.n));
  return finished;
}

// The engine's answer matches the reference's beams, in order, with their logprobs.
void CheckBeams(CollectingSink& sink, const std::vector<ReferenceBeam>& expected, size_t prompt_length) {
  REQUIRE(sink.WaitDone());
  REQUIRE(sink.status().ok());
  CHECK(sink.num_responses() == 1);  // the beams come back together, at the end
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("choice " << i);
    const CollectingSink::Choice choice = sink.choice(static_cast<uint32_t>(i));
    CHECK(choice.tokens == expected[i].output);
    REQUIRE(choice.logprobs.size() == choice.tokens.size());
    double cumulative = 0;
    for (const v1::TokenLogprob& entry : choice.logprobs) cumulative += entry.logprob();
    CHECK(cumulative == Approx(expected[i].cumulative).margin(1e-3));
    CHECK(choice.finish_reason != v1::FINISH_REASON_UNSPECIFIED);
    completion_tokens += static_cast<int64_t>(choice.tokens.size());
  }
  CHECK(sink.choice(static_cast<uint32_t>(expected.size())).tokens.empty());  // no more than n
  CHECK(sink.usage().prompt_tokens() == prompt_length);
  CHECK(sink.usage().completion_tokens() == completion_tokens);
}

TEST_CASE("beam search: the engine's beams are the brute-force reference's", "[integration][engine][beam]") {
  auto oracle = StartBeamEngine(/*prefix_caching=*/false);
  const int64_t max_model_len = 2048;
  const std::vector<int32_t> prompt = BeamPrompt(1, 21);
  // A token the first step likes, as a stop token: some beams finish early and compete with longer ones.
  const int32_t likely = NextTokens(*oracle, prompt, 4)[1].first;

  std::vector<BeamSettings> cases(5);
  cases[1] = {4, 4, 10, 0.5f, v1::BEAM_EARLY_STOPPING_NEVER, {likely}};
  cases[2] = {2, 1, 6, 2.0f, v1::BEAM_EARLY_STOPPING_WHEN_FULL, {likely}};
  cases[3] = {5, 3, 7, -1.0f, v1::BEAM_EARLY_STOPPING_HEURISTIC, {likely, kEos}};
  cases[4] = {3, 3, 9, 1.0f, v1::BEAM_EARLY_STOPPING_NEVER, {}};
  for (const bool prefix_caching : {true, false}) {
    auto engine = StartBeamEngine(prefix_caching);
    for (size_t c = 0; c < cases.size(); ++c) {
      INFO("case " << c << (prefix_caching ? " with" : " without") << " prefix caching");
      const std::vector<ReferenceBeam> expected = ReferenceBeamSearch(*oracle, prompt, cases[c], max_model_len);
      REQUIRE(expected.size() == cases[c].n);
      auto sink = testing::SubmitCollecting(*engine, BeamRequest(prompt, cases[c]));
      CheckBeams(*sink, expected, prompt.size());
    }
  }
}

TEST_CASE("beam search: beside greedy requests, and under preemption, the beams stay the same",
          "[integration][engine][beam]") {
  auto oracle = StartBeamEngine(/*prefix_caching=*/false);
  const BeamSettings settings{4, 2, 12, 1.0f, v1::BEAM_EARLY_STOPPING_HEURISTIC, {}};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<ReferenceBeam>> expected;
  for (int variant = 0; variant < 3; ++variant) {
    prompts.push_back(BeamPrompt(variant + 2, 30 + 9 * variant));
    expected.push_back(ReferenceBeamSearch(*oracle, prompts.back(), settings, 2048));
  }
  const GenerationRequest greedy = testing::ReferenceGreedyRequest(testing::Float32ParityReference().prompts[0]);
  const std::vector<int32_t> greedy_tokens = testing::ToIds(testing::Float32ParityReference().continuations[0]);

  // With a cache of 14 blocks, three requests of four beams (up to 4 blocks each) and a greedy stream do not
  // fit: beams are preempted and recomputed while others of their request wait, and blocks shared by forks
  // are freed.
  const bool small_cache = GENERATE(false, true);
  INFO((small_cache ? "a cache too small for all the beams" : "enough memory"));
  int64_t kv_cache_bytes = 64 << 20;
  if (small_cache) {
    auto probe = model::LoadedModel::Load(testing::Float32ParityDir() + "/package", {"cpu", ""});
    REQUIRE(probe.ok());
    kv_cache_bytes = 14 * (*probe)->KvCacheBlockBytes(16);
  }
  auto engine = StartBeamEngine(/*prefix_caching=*/true, kv_cache_bytes);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const auto& prompt : prompts) sinks.push_back(testing::SubmitCollecting(*engine, BeamRequest(prompt, settings)));
  auto greedy_sink = testing::SubmitCollecting(*engine, greedy);
  for (size_t i = 0; i < sinks.size(); ++i) {
    INFO("request " << i);
    CheckBeams(*sinks[i], expected[i], prompts[i].size());
  }
  REQUIRE(greedy_sink->WaitDone());
  CHECK(greedy_sink->choice(0).tokens == greedy_tokens);
  CHECK(engine->Load().num_kv_blocks_used == 0);  // no block leaked by forks, copies or preemptions
  if (small_cache) CHECK(engine->Load().num_preemptions > 0);
}

TEST_CASE("beam search: a lone search in a cache too small for its beams still finishes",
          "[integration][engine][beam]") {
  // Four beams of 40 + 40 tokens need up to 15 blocks (fewer where they share); the cache has 7. Beams that have
  // proposed hold blocks while they wait for a preempted sibling, so they must give them up or the sibling never
  // returns.
  auto oracle = StartBeamEngine(/*prefix_caching=*/false);
  const BeamSettings settings{4, 2, 40, 1.0f, v1::BEAM_EARLY_STOPPING_HEURISTIC, {}};
  const std::vector<int32_t> prompt = BeamPrompt(11, 40);
  const std::vector<ReferenceBeam> expected = ReferenceBeamSearch(*oracle, prompt, settings, 2048);
  const bool prefix_caching = GENERATE(false, true);
  INFO((prefix_caching ? "with" : "without") << " prefix caching");
  auto probe = model::LoadedModel::Load(testing::Float32ParityDir() + "/package", {"cpu", ""});
  REQUIRE(probe.ok());
  auto engine = StartBeamEngine(prefix_caching, 7 * (*probe)->KvCacheBlockBytes(16));
  GenerationRequest request = BeamRequest(prompt, settings);
  request.deadline = absl::Now() + absl::Seconds(60);  // a wedged search fails instead of hanging
  auto sink = testing::SubmitCollecting(*engine, std::move(request));
  CheckBeams(*sink, expected, prompt.size());
  CHECK(engine->Load().num_preemptions > 0);
  CHECK(engine->Load().num_kv_blocks_used == 0);
}

TEST_CASE("beam search: a width beyond max_running is refused, and the running limit counts every beam",
          "[integration][engine][beam]") {
  EngineOptions options;
  options.kv_cache_bytes = 64 << 20;
  options.max_running = 4;
  FirstTokenCounter observer;
  auto engine = testing::StartParityEngine(testing::Float32ParityDir() + "/package", options, &observer);
  BeamSettings wide{5, 1, 4, 1.0f, v1::BEAM_EARLY_STOPPING_HEURISTIC, {}};
  const absl::StatusOr<uint64_t> refused =
      engine->Submit(BeamRequest(BeamPrompt(3, 20), wide), std::make_shared<CollectingSink>());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("max_running"));
  // Two searches of three beams under a limit of four: they run one after the other, never seven at once.
  BeamSettings three{3, 1, 6, 1.0f, v1::BEAM_EARLY_STOPPING_HEURISTIC, {}};
  auto first = testing::SubmitCollecting(*engine, BeamRequest(BeamPrompt(4, 20), three));
  auto second = testing::SubmitCollecting(*engine, BeamRequest(BeamPrompt(5, 20), three));
  int64_t most_running = 0;
  for (int i = 0; i < 2000 && engine->NumUnfinished() > 0; ++i) {
    most_running = std::max(most_running, engine->Load().num_running);
    absl::SleepFor(absl::Milliseconds(1));
  }
  REQUIRE(first->WaitDone());
  REQUIRE(second->WaitDone());
  CHECK(first->status().ok());
  CHECK(second->status().ok());
  CHECK(most_running <= 4);
  CHECK(observer.first_tokens() == 2);  // each search's first selection counts towards TTFT
  engine->Stop();
}

TEST_CASE("beam search: cancelling a search frees every beam's blocks", "[integration][engine][beam]") {
  auto engine = StartBeamEngine(/*prefix_caching=*/false);
  BeamSettings settings{8, 2, 200, 1.0f, v1::BEAM_EARLY_STOPPING_NEVER, {}};
  auto sink = std::make_shared<CollectingSink>();
  auto id = engine->Submit(BeamRequest(BeamPrompt(7, 40), settings), sink);
  REQUIRE(id.ok());
  engine->Abort(*id);
  REQUIRE(sink->WaitDone());
  CHECK(sink->status().code() == absl::StatusCode::kCancelled);
  for (int i = 0; i < 200 && engine->Load().num_kv_blocks_used != 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  CHECK(engine->Load().num_kv_blocks_used == 0);
}

TEST_CASE("beam search: a selection copies no beam's history, and never the prompt after the first",
          "[integration][engine][beam]") {
  // Four beams, 16 tokens, nothing ending early (no regrowth of the beam count): the first selection copies
  // the prompt into the three beams that join the first; later ones rewrite spare vectors only after the
  // point where two outputs part, at most width × the output so far, however long the prompt.
  const BeamSettings settings{4, 2, 16, 1.0f, v1::BEAM_EARLY_STOPPING_NEVER, {}};
  auto engine = StartBeamEngine(/*prefix_caching=*/true);
  for (const int64_t prompt_length : {20, 600}) {
    INFO("a prompt of " << prompt_length);
    BeamSearchAction::ResetCopyCounts();
    GenerationRequest request = BeamRequest(BeamPrompt(13, prompt_length), settings);
    request.sampling.ignore_eos = true;
    request.sampling.top_logprobs = 5;
    auto sink = testing::SubmitCollecting(*engine, std::move(request));
    REQUIRE(sink->WaitDone());
    REQUIRE(sink->status().ok());
    for (uint32_t i = 0; i < settings.n; ++i) {
      CHECK(sink->choice(i).tokens.size() == settings.max_tokens);
      CHECK(sink->choice(i).logprobs.size() == settings.max_tokens);
    }
    const BeamSearchAction::CopyCounts counts = BeamSearchAction::copy_counts();
    const int64_t width = settings.width;
    CHECK(counts.selections == settings.max_tokens);
    // One history node per extension: at most 2 × width per selection, whatever the length so far.
    CHECK(counts.history_nodes <= 2 * width * counts.selections);
    CHECK(counts.tokens_copied_whole == (width - 1) * prompt_length);
    CHECK(counts.max_tokens_rewritten <= width * static_cast<int64_t>(settings.max_tokens));
    CHECK(counts.tokens_rewritten <= counts.selections * width * static_cast<int64_t>(settings.max_tokens));
  }
  CHECK(engine->Load().num_kv_blocks_used == 0);
}

TEST_CASE("beam search: histories share their nodes and free long chains without deep recursion",
          "[unit][engine][beam]") {
  BeamHistory root;
  CHECK(root.size() == 0);
  const BeamHistory ab = root.Extend(1, "a", {}).Extend(2, "b", {});
  v1::TokenLogprob entry;
  entry.set_token_id(3);
  const BeamHistory abc = ab.Extend(3, "c", {entry});
  const BeamHistory abd = ab.Extend(4, "d", {});
  CHECK(BeamHistory::CommonLength(abc, abd) == 2);
  CHECK(BeamHistory::CommonLength(abc, ab) == 2);
  CHECK(BeamHistory::CommonLength(abc, root) == 0);
  CHECK(BeamHistory::CommonLength(abc, abc) == 3);
  const BeamHistory::Output output = abc.Lay();
  CHECK(output.tokens == std::vector<int32_t>{1, 2, 3});
  CHECK(output.text == "abc");
  REQUIRE(output.logprobs.size() == 1);
  CHECK(output.logprobs[0].token_id() == 3);
  CHECK(abd.Lay().text == "abd");
  // A chain far longer than any stack could unwind recursively.
  auto chain = std::make_unique<BeamHistory>(abc);
  for (int i = 0; i < 2000000; ++i) *chain = chain->Extend(i, "", {});
  const BeamHistory branch = chain->Extend(7, "x", {});
  CHECK(BeamHistory::CommonLength(branch, abd) == 2);
  chain.reset();
  CHECK(branch.size() == 2000004);
  CHECK(abc.Lay().text == "abc");  // the shared start outlives the chain
}

}  // namespace
}  // namespace llmc::engine
