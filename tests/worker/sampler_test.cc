#include "worker/engine/sampler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "tests/support/catch.h"

namespace llmc::engine {
namespace {

// Owns what a SamplerRow points at.
struct TestRow {
  SamplingOptions options;
  std::mt19937_64 rng{0};
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::vector<int32_t> suppressed;

  SamplerRow View() { return {&options, &rng, prompt, output, suppressed}; }
};

at::Tensor Logits(const std::vector<std::vector<float>>& rows) {
  at::Tensor logits = at::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.at(0).size())});
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(rows[r].begin(), rows[r].end(), logits[r].data_ptr<float>());
  }
  return logits;
}

std::vector<float> LogOf(const std::vector<float>& probabilities) {
  std::vector<float> logs;
  for (const float p : probabilities) logs.push_back(std::log(p));
  return logs;
}

std::vector<SampledToken> SampleRows(at::Tensor logits, std::vector<TestRow*> rows) {
  std::vector<SamplerRow> views;
  for (TestRow* row : rows) views.push_back(row->View());
  return Sampler().Sample(logits, views);
}

SampledToken SampleOne(const std::vector<float>& logits, TestRow& row) {
  return SampleRows(Logits({logits}), {&row})[0];
}

// `draws` tokens for one row of logits: one batch of `draws` rows, each drawing once from the generator of
// choice i of a request seeded with `seed`.
std::map<int32_t, int> Frequencies(const std::vector<float>& logits, const SamplingOptions& options, int draws,
                                   uint64_t seed = 1234) {
  std::vector<std::unique_ptr<TestRow>> rows;
  std::vector<TestRow*> pointers;
  for (int i = 0; i < draws; ++i) {
    rows.push_back(std::make_unique<TestRow>());
    rows.back()->options = options;
    rows.back()->options.seed = seed;
    rows.back()->rng = MakeChoiceGenerator(rows.back()->options, i);
    pointers.push_back(rows.back().get());
  }
  std::map<int32_t, int> counts;
  for (const SampledToken& token : SampleRows(Logits({logits}).repeat({draws, 1}), pointers)) ++counts[token.token_id];
  return counts;
}

std::set<int32_t> Support(const std::map<int32_t, int>& counts) {
  std::set<int32_t> support;
  for (const auto& [id, count] : counts) support.insert(id);
  return support;
}

// The observed share of `id` is within five standard deviations of `probability`.
void CheckShare(const std::map<int32_t, int>& counts, int32_t id, double probability, int draws) {
  const auto found = counts.find(id);
  const double share = found == counts.end() ? 0.0 : static_cast<double>(found->second) / draws;
  const double bound = 5 * std::sqrt(probability * (1 - probability) / draws);
  INFO("token " << id << " share " << share << " expected " << probability);
  CHECK(std::abs(share - probability) <= bound);
}

std::vector<float> RandomLogits(int64_t vocab, uint64_t seed, double scale = 1.0) {
  at::manual_seed(seed);
  const at::Tensor values = at::randn({vocab}) * scale;
  return std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + vocab);
}

int32_t ArgmaxOf(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST_CASE("sampler: greedy takes the argmax, the lowest id on ties", "[unit][sampler]") {
  TestRow row;
  row.options.temperature = 0;
  CHECK(SampleOne({0.1f, 2.0f, -1.0f, 1.9f}, row).token_id == 1);
  CHECK(SampleOne({-5.0f, -3.0f, -3.0f, -4.0f}, row).token_id == 1);
  CHECK(SampleOne({7.0f, 7.0f}, row).token_id == 0);
  for (uint64_t seed = 0; seed < 5; ++seed) {
    const std::vector<float> logits = RandomLogits(5000, seed);
    CHECK(SampleOne(logits, row).token_id == ArgmaxOf(logits));
  }
}

TEST_CASE("sampler: a tiny temperature behaves like greedy", "[unit][sampler]") {
  SamplingOptions options;
  options.temperature = 1e-4f;
  const std::vector<float> logits = RandomLogits(1000, 3);
  const auto counts = Frequencies(logits, options, 200);
  CHECK(Support(counts) == std::set<int32_t>{ArgmaxOf(logits)});

  // And a high temperature spreads the draws over the vocabulary.
  options.temperature = 100.0f;
  CHECK(Support(Frequencies(logits, options, 200)).size() > 100);
}

TEST_CASE("sampler: top_k = 1 equals greedy", "[unit][sampler]") {
  SamplingOptions options;
  options.top_k = 1;
  options.temperature = 1.5f;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const std::vector<float> logits = RandomLogits(2000, seed, 0.1);  // nearly flat: only top-k can explain it
    CHECK(Support(Frequencies(logits, options, 100, seed)) == std::set<int32_t>{ArgmaxOf(logits)});
  }
}

TEST_CASE("sampler: top_k restricts draws to the k best", "[unit][sampler]") {
  const std::vector<float> logits = RandomLogits(500, 11, 0.5);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  SamplingOptions options;
  options.top_k = 5;
  constexpr int kDraws = 20000;
  const auto counts = Frequencies(logits, options, kDraws);
  CHECK(Support(counts) == std::set<int32_t>(order.begin(), order.begin() + 5));
  double mass = 0;
  for (int i = 0; i < 5; ++i) mass += std::exp(logits[order[i]]);
  for (int i = 0; i < 5; ++i) CheckShare(counts, order[i], std::exp(logits[order[i]]) / mass, kDraws);
}

TEST_CASE("sampler: top_p keeps exactly the nucleus", "[unit][sampler]") {
  // Shuffled so that the nucleus is not simply a prefix of the ids.
  const std::vector<float> probabilities = {0.05f, 0.3f, 0.15f, 0.5f};
  const std::vector<float> logits = LogOf(probabilities);
  constexpr int kDraws = 20000;
  SamplingOptions options;

  options.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  auto counts = Frequencies(logits, options, kDraws);
  CHECK(Support(counts) == std::set<int32_t>{1, 3});
  CheckShare(counts, 3, 0.5 / 0.8, kDraws);

  options.top_p = 0.85f;  // needs the 0.15 as well
  counts = Frequencies(logits, options, kDraws);
  CHECK(Support(counts) == std::set<int32_t>{1, 2, 3});
  CheckShare(counts, 3, 0.5 / 0.95, kDraws);
  CheckShare(counts, 2, 0.15 / 0.95, kDraws);

  options.top_p = 0.3f;  // the best token alone already has more
  CHECK(Support(Frequencies(logits, options, 500)) == std::set<int32_t>{3});

  options.top_p = 1.0f;
  counts = Frequencies(logits, options, kDraws);
  CHECK(Support(counts) == std::set<int32_t>{0, 1, 2, 3});
  CheckShare(counts, 0, 0.05, kDraws);
}

TEST_CASE("sampler: top_p applies to the distribution after temperature and top_k", "[unit][sampler]") {
  // After top_k = 3 the shares are 0.5/0.95, 0.3/0.95, 0.15/0.95; top_p = 0.8 then needs two of them.
  const std::vector<float> logits = LogOf({0.05f, 0.3f, 0.15f, 0.5f});
  SamplingOptions options;
  options.top_k = 3;
  options.top_p = 0.8f;
  CHECK(Support(Frequencies(logits, options, 3000)) == std::set<int32_t>{1, 3});

  // Temperature 2 flattens to sqrt-proportional shares: 0.224, 0.548, 0.387, 0.707 (sum 1.866), so the
  // best two hold 0.672 of the mass and top_p = 0.7 needs the third.
  options.top_k = 0;
  options.temperature = 2.0f;
  options.top_p = 0.7f;
  CHECK(Support(Frequencies(logits, options, 3000)) == std::set<int32_t>{1, 2, 3});
}

TEST_CASE("sampler: top_k and top_p cut ties in favour of the lower ids, also past the fast paths", "[unit][sampler]") {
  // Even ids weigh 1 and odd ids 0.5: 500 heavy tokens holding 500 of a total mass of 750.
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = i % 2 == 0 ? 0.0f : std::log(0.5f);
  const auto even_ids_below = [](int32_t end) {
    std::set<int32_t> ids;
    for (int32_t id = 0; id < end; id += 2) ids.insert(id);
    return ids;
  };
  SamplingOptions options;
  options.top_k = 100;  // the 100 heavy tokens with the lowest ids
  CHECK(Support(Frequencies(logits, options, 5000)) == even_ids_below(200));

  options.top_k = 0;
  options.top_p = 0.5005f;  // 375.375 of the mass: 376 heavy tokens
  CHECK(Support(Frequencies(logits, options, 8000)) == even_ids_below(752));

  options.top_k = 400;      // 400 heavy tokens, mass 400
  options.top_p = 0.8005f;  // 320.2 of it: 321 tokens
  CHECK(Support(Frequencies(logits, options, 8000)) == even_ids_below(642));
}

TEST_CASE("sampler: top_p finds a nucleus made of a long light tail", "[unit][sampler]") {
  // One token of weight 1 and 99,999 of weight 1e-4 (total about 11): half the mass takes the heavy token
  // and about 45,000 light ones, the lowest ids first.
  std::vector<float> logits(100000, std::log(1e-4f));
  logits[0] = 0.0f;
  const double light = std::exp(static_cast<double>(logits[1]));
  const double target = 0.5 * (1.0 + 99999 * light);
  const auto last_member = static_cast<int32_t>(std::ceil((target - 1.0) / light));
  TestRow row;
  row.options.top_p = 0.5f;
  row.rng.seed(9);
  int heavy = 0;
  int32_t deepest = 0;
  for (int i = 0; i < 500; ++i) {
    const int32_t token = SampleOne(logits, row).token_id;
    heavy += token == 0 ? 1 : 0;
    deepest = std::max(deepest, token);
  }
  INFO("last member " << last_member);
  CHECK(deepest <= last_member + 1);
  CHECK(deepest >= last_member * 9 / 10);
  CHECK(heavy > 500 * 0.1);  // about 2/11 of the draws
  CHECK(heavy < 500 * 0.27);
}

TEST_CASE("sampler: min_p drops tokens below min_p times the best probability", "[unit][sampler]") {
  const std::vector<float> logits = LogOf({0.05f, 0.3f, 0.15f, 0.5f});
  constexpr int kDraws = 20000;
  SamplingOptions options;
  options.min_p = 0.25f;  // the bar is 0.125: only 0.05 falls
  auto counts = Frequencies(logits, options, kDraws);
  CHECK(Support(counts) == std::set<int32_t>{1, 2, 3});
  CheckShare(counts, 2, 0.15 / 0.95, kDraws);

  options.min_p = 0.5f;  // the bar is 0.25
  counts = Frequencies(logits, options, kDraws);
  CHECK(Support(counts) == std::set<int32_t>{1, 3});
  CheckShare(counts, 1, 0.3 / 0.8, kDraws);

  options.min_p = 1.0f;
  CHECK(Support(Frequencies(logits, options, 500)) == std::set<int32_t>{3});
}

TEST_CASE("sampler: penalties change exactly the affected logits", "[unit][sampler]") {
  TestRow row;
  row.options.temperature = 0;
  row.options.repetition_penalty = 2.0f;
  row.options.presence_penalty = 0.5f;
  row.options.frequency_penalty = 0.25f;
  row.prompt = {0, 1, 0, 0};
  row.output = {1, 2, 2};
  const std::vector<float> expected = {1.0f,  // prompt only: positive, divided once however often it appears
                                       -1.0f * 2 - 0.25f - 0.5f,     // prompt and output once: negative, multiplied
                                       0.5f / 2 - 2 * 0.25f - 0.5f,  // output twice
                                       3.0f,
                                       1.0f,
                                       -0.5f};  // untouched
  // Several identical rows, so that some thread handles more than one and reuses its buffers.
  constexpr int kRows = 6;
  std::vector<TestRow> rows(kRows, row);
  std::vector<TestRow*> pointers;
  for (TestRow& copy : rows) pointers.push_back(&copy);
  at::Tensor logits = Logits({{2.0f, -1.0f, 0.5f, 3.0f, 1.0f, -0.5f}}).repeat({kRows, 1});
  const auto sampled = SampleRows(logits, pointers);
  for (int r = 0; r < kRows; ++r) {
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("row " << r << " token " << i);
      CHECK(logits[r][i].item<float>() == Approx(expected[i]).margin(1e-6));
    }
    CHECK(sampled[r].token_id == 3);
  }
}

TEST_CASE("sampler: each penalty can flip the greedy choice", "[unit][sampler]") {
  TestRow row;
  row.options.temperature = 0;

  row.options.repetition_penalty = 1.5f;
  row.prompt = {0};
  CHECK(SampleOne({2.0f, 1.5f}, row).token_id == 1);    // 2 / 1.5 < 1.5
  CHECK(SampleOne({-1.0f, -1.2f}, row).token_id == 1);  // -1 × 1.5 < -1.2
  row.options.repetition_penalty = 1.0f;
  CHECK(SampleOne({2.0f, 1.5f}, row).token_id == 0);
  row.prompt.clear();

  row.options.presence_penalty = 0.2f;
  row.output = {0, 0, 0};
  CHECK(SampleOne({1.0f, 0.9f}, row).token_id == 1);
  CHECK(SampleOne({1.0f, 0.7f}, row).token_id == 0);  // subtracted once, not per occurrence
  row.options.presence_penalty = 0.0f;

  row.options.frequency_penalty = 0.2f;
  row.output = {0};
  CHECK(SampleOne({1.0f, 0.7f}, row).token_id == 0);  // 0.8
  row.output = {0, 0};
  CHECK(SampleOne({1.0f, 0.7f}, row).token_id == 1);  // 0.6
  row.options.frequency_penalty = -0.5f;              // negative values encourage repetition
  CHECK(SampleOne({0.0f, 0.7f}, row).token_id == 0);
}

TEST_CASE("sampler: suppressed ids are never chosen", "[unit][sampler]") {
  const std::vector<float> logits = {5.0f, 1.0f, 4.0f, 0.5f, 0.0f};
  TestRow row;
  row.options.temperature = 0;
  row.suppressed = {0, 2};
  at::Tensor tensor = Logits({logits});
  CHECK(SampleRows(tensor, {&row})[0].token_id == 1);
  CHECK(std::isinf(tensor[0][0].item<float>()));
  CHECK(std::isinf(tensor[0][2].item<float>()));
  CHECK(tensor[0][1].item<float>() == 1.0f);

  // Even with a penalty that would push a suppressed logit back up.
  row.options.temperature = 2.0f;
  row.options.frequency_penalty = -2.0f;
  row.output = {0, 0, 0};
  for (int i = 0; i < 2000; ++i) {
    const int32_t token = SampleOne(logits, row).token_id;
    REQUIRE(token != 0);
    REQUIRE(token != 2);
  }
}

TEST_CASE("sampler: logprobs are those of the raw logits", "[unit][sampler]") {
  constexpr int64_t kVocab = 3000;
  std::vector<std::unique_ptr<TestRow>> rows;
  std::vector<std::vector<float>> values;
  for (int i = 0; i < 4; ++i) {
    rows.push_back(std::make_unique<TestRow>());
    rows.back()->rng.seed(i);
    values.push_back(RandomLogits(kVocab, 100 + i, 3.0));
  }
  rows[0]->options.temperature = 0;  // greedy, logprob of the argmax
  rows[0]->options.logprobs = true;
  rows[1]->options.temperature = 0.7f;  // with everything that changes the logits; logprobs must not see it
  rows[1]->options.top_logprobs = 5;
  rows[1]->options.repetition_penalty = 1.3f;
  rows[1]->options.presence_penalty = 1.0f;
  rows[1]->options.top_p = 0.9f;
  rows[1]->prompt = {1, 2, 3};
  rows[1]->output = {ArgmaxOf(values[1]), 7, 7};
  rows[1]->suppressed = {ArgmaxOf(values[1]) == 0 ? 1 : 0};
  rows[2]->options.logprobs = true;
  rows[2]->options.top_logprobs = 20;
  rows[2]->options.frequency_penalty = 2.0f;
  rows[2]->output = {ArgmaxOf(values[2])};  // chosen less often, but logprob stays raw
  rows[3]->options.top_k = 10;              // no logprobs asked for

  const at::Tensor logits = Logits(values);
  const at::Tensor expected = at::log_softmax(logits, 1);
  std::vector<TestRow*> pointers;
  for (auto& row : rows) pointers.push_back(row.get());
  for (int step = 0; step < 20; ++step) {
    const auto sampled = SampleRows(logits.clone(), pointers);
    for (int r = 0; r < 3; ++r) {
      INFO("row " << r << " step " << step);
      const SampledToken& token = sampled[r];
      CHECK(token.logprob == Approx(expected[r][token.token_id].item<float>()).margin(1e-5));
      const auto best = at::topk(expected[r], pointers[r]->options.top_logprobs);
      const at::Tensor best_values = std::get<0>(best);
      const at::Tensor best_ids = std::get<1>(best);
      REQUIRE(token.top_logprobs.size() == pointers[r]->options.top_logprobs);
      for (size_t k = 0; k < token.top_logprobs.size(); ++k) {
        CHECK(token.top_logprobs[k].first == best_ids[k].item<int64_t>());
        CHECK(token.top_logprobs[k].second == Approx(best_values[k].item<float>()).margin(1e-5));
        if (k > 0) CHECK(token.top_logprobs[k].second <= token.top_logprobs[k - 1].second);
      }
    }
    CHECK(sampled[0].token_id == ArgmaxOf(values[0]));
    CHECK(sampled[3].top_logprobs.empty());
  }
}

TEST_CASE("sampler: top_logprobs on equal logits list the lower ids first", "[unit][sampler]") {
  TestRow row;
  row.options.temperature = 0;
  row.options.top_logprobs = 3;
  const SampledToken token = SampleOne({1.0f, 2.0f, 1.0f, 2.0f, 1.0f}, row);
  REQUIRE(token.top_logprobs.size() == 3);
  CHECK(token.top_logprobs[0].first == 1);
  CHECK(token.top_logprobs[1].first == 3);
  CHECK(token.top_logprobs[2].first == 0);
  CHECK(token.top_logprobs[0].second == Approx(token.logprob));
}

// `steps` tokens of a seeded row, sampled in a batch with `others` around it at `position`.
std::vector<int32_t> SeededSequence(uint64_t seed, const std::vector<std::vector<float>>& steps_logits, size_t others,
                                    size_t position) {
  TestRow seeded;
  seeded.options.seed = seed;
  seeded.options.top_p = 0.95f;
  seeded.options.repetition_penalty = 1.1f;
  seeded.rng = MakeChoiceGenerator(seeded.options, 0);
  std::vector<std::unique_ptr<TestRow>> rows;
  for (size_t i = 0; i < others; ++i) {
    rows.push_back(std::make_unique<TestRow>());
    rows.back()->options.top_k = static_cast<int32_t>(i * 7);
    rows.back()->options.temperature = i % 2 == 0 ? 0.0f : 1.3f;
    rows.back()->rng = MakeChoiceGenerator(rows.back()->options, 0);  // unseeded
  }
  std::vector<int32_t> tokens;
  for (const std::vector<float>& logits : steps_logits) {
    std::vector<TestRow*> batch;
    std::vector<std::vector<float>> batch_logits;
    for (size_t i = 0; i < others; ++i) {
      batch.push_back(rows[i].get());
      batch_logits.push_back(RandomLogits(static_cast<int64_t>(logits.size()), 1000 + i + tokens.size()));
    }
    batch.insert(batch.begin() + position, &seeded);
    batch_logits.insert(batch_logits.begin() + position, logits);
    const int32_t token = SampleRows(Logits(batch_logits), batch)[position].token_id;
    tokens.push_back(token);
    seeded.output.push_back(token);
  }
  return tokens;
}

TEST_CASE("sampler: the same seed gives the same tokens whatever the batch", "[unit][sampler]") {
  std::vector<std::vector<float>> steps;
  for (int i = 0; i < 30; ++i) steps.push_back(RandomLogits(4000, 500 + i, 0.5));
  const std::vector<int32_t> alone = SeededSequence(42, steps, 0, 0);
  CHECK(SeededSequence(42, steps, 0, 0) == alone);
  CHECK(SeededSequence(42, steps, 3, 0) == alone);
  CHECK(SeededSequence(42, steps, 5, 2) == alone);
  CHECK(SeededSequence(42, steps, 9, 9) == alone);
  CHECK(SeededSequence(43, steps, 0, 0) != alone);
  CHECK(SeededSequence(7, steps, 4, 1) != alone);
}

TEST_CASE("sampler: choice generators come from seed + index, or from the OS", "[unit][sampler]") {
  SamplingOptions options;
  options.seed = 41;
  std::mt19937_64 second_choice = MakeChoiceGenerator(options, 1);
  std::mt19937_64 expected(42);
  CHECK(second_choice() == expected());
  std::mt19937_64 first_choice = MakeChoiceGenerator(options, 0);
  CHECK(first_choice() != MakeChoiceGenerator(options, 1)());

  options.seed.reset();
  std::mt19937_64 a = MakeChoiceGenerator(options, 0);
  std::mt19937_64 b = MakeChoiceGenerator(options, 0);
  CHECK(a() != b());
}

TEST_CASE("sampler: a full-size vocabulary with a wide nucleus still draws from the nucleus", "[unit][sampler]") {
  constexpr int64_t kVocab = 151936;
  for (const int32_t top_k : {0, 50, 20000}) {
    std::vector<float> logits = RandomLogits(kVocab, 77 + top_k, 0.01);  // near uniform: the nucleus is ~90%
    TestRow row;
    row.options.top_p = 0.9f;
    row.options.top_k = top_k;
    row.options.seed = 5;
    row.rng = MakeChoiceGenerator(row.options, 0);

    // The nucleus by a full sort, as a reference: tokens lighter than its lightest member never appear.
    const at::Tensor probabilities = at::softmax(Logits({logits})[0], 0);
    const int64_t considered = top_k == 0 ? kVocab : top_k;
    const auto sorted = at::topk(probabilities, considered);
    const at::Tensor kept = std::get<0>(sorted) / std::get<0>(sorted).sum();
    const int64_t nucleus = (at::cumsum(kept.to(at::kDouble), 0) < 0.9).sum().item<int64_t>() + 1;
    // Two tokens of slack at the edge, where float and double rounding may disagree.
    const int64_t allowed = std::min(nucleus + 2, considered);
    std::set<int64_t> members;
    const at::Tensor ids = std::get<1>(sorted);
    for (int64_t i = 0; i < allowed; ++i) members.insert(ids[i].item<int64_t>());
    INFO("top_k " << top_k << " nucleus " << nucleus);
    std::vector<int64_t> rank(kVocab, kVocab);
    for (int64_t i = 0; i < considered; ++i) rank[ids[i].item<int64_t>()] = i;
    int64_t deepest = 0;
    for (int i = 0; i < 100; ++i) {
      const int32_t token = SampleOne(logits, row).token_id;
      REQUIRE(token >= 0);
      REQUIRE(token < kVocab);
      CHECK(members.count(token) == 1);
      deepest = std::max(deepest, rank[token]);
    }
    // Nor is the nucleus cut short: 100 draws from all of it reach its last fifth.
    CHECK(deepest >= nucleus * 4 / 5);
  }
}

TEST_CASE("sampler: rejects logits that do not match the rows", "[unit][sampler]") {
  TestRow row;
  at::Tensor two_rows = Logits({{1.0f, 2.0f}, {1.0f, 2.0f}});
  CHECK_THROWS(SampleRows(two_rows, {&row}));
  at::Tensor doubles = Logits({{1.0f, 2.0f}}).to(at::kDouble);
  CHECK_THROWS(SampleRows(doubles, {&row}));
  row.output = {5};
  row.options.presence_penalty = 1.0f;
  CHECK_THROWS(SampleOne({1.0f, 2.0f}, row));
}

}  // namespace
}  // namespace llmc::engine

namespace llmc::engine {
namespace {

TEST_CASE("sampler: which options can sample from the top logits alone", "[unit][sampler]") {
  SamplingOptions greedy;
  greedy.temperature = 0;
  CHECK(TopLogitsNeeded(greedy, false, 1000) == 1);
  CHECK(TopLogitsNeeded(greedy, true, 1000) == 0);  // a suppressed id might be the best
  SamplingOptions top_k;
  top_k.top_k = 40;
  top_k.top_p = 0.9f;
  top_k.min_p = 0.05f;
  CHECK(TopLogitsNeeded(top_k, false, 1000) == 40);
  CHECK(TopLogitsNeeded(top_k, false, 40) == 0);  // the whole vocabulary: no top-k at all
  top_k.top_k = kMaxTopLogitsForSampling + 1;
  CHECK(TopLogitsNeeded(top_k, false, 1000) == 0);
  SamplingOptions plain;  // temperature 1 over the whole vocabulary
  CHECK(TopLogitsNeeded(plain, false, 1000) == 0);
  for (auto change : std::vector<void (*)(SamplingOptions&)>{[](SamplingOptions& o) { o.logprobs = true; },
                                                             [](SamplingOptions& o) { o.top_logprobs = 2; },
                                                             [](SamplingOptions& o) { o.repetition_penalty = 1.1f; },
                                                             [](SamplingOptions& o) { o.presence_penalty = 0.5f; },
                                                             [](SamplingOptions& o) { o.frequency_penalty = 0.5f; }}) {
    SamplingOptions options = greedy;
    change(options);
    CHECK(TopLogitsNeeded(options, false, 1000) == 0);
  }
}

// A row given as its top logits draws exactly what the same row given in full draws, from the same
// generator state, whatever the order of the rows in the batch.
TEST_CASE("sampler: rows given as top logits draw what their full rows draw", "[unit][sampler]") {
  at::manual_seed(7);
  const int64_t vocab = 5000, top = kMaxTopLogitsForSampling;
  std::vector<SamplingOptions> cases(5);
  cases[0].temperature = 0;
  cases[1].top_k = 1;
  cases[2].top_k = 20;
  cases[2].temperature = 0.8f;
  cases[3].top_k = 50;
  cases[3].top_p = 0.7f;
  cases[4].top_k = top;
  cases[4].min_p = 0.1f;
  cases[4].temperature = 1.5f;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      at::Tensor logits = at::randn({1, vocab}) * 3;
      logits[0][17] = logits[0][4000] = logits.max();  // a tie at the top: the lower id first
      const auto [values, ids] = at::sort(logits, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
      const at::Tensor top_values = values.narrow(1, 0, top).contiguous(), top_ids = ids.narrow(1, 0, top).contiguous();
      TestRow full_row, top_row, other_row;
      for (TestRow* row : {&full_row, &top_row, &other_row}) {
        row->options = cases[c];
        row->options.seed = seed;
        row->rng = MakeChoiceGenerator(row->options, 0);
      }
      std::vector<SampledToken> from_full, from_top;
      for (int step = 0; step < 4; ++step) {
        at::Tensor full_copy = logits.clone();
        from_full.push_back(SampleRows(full_copy, {&full_row})[0]);
        // The top row shares the batch with a full row that comes after it.
        SamplerRow top_view = top_row.View();
        top_view.top_values = top_values.data_ptr<float>();
        top_view.top_ids = top_ids.data_ptr<int64_t>();
        at::Tensor other = logits.clone();
        from_top.push_back(Sampler().Sample(other, {top_view, other_row.View()})[0]);
      }
      for (int step = 0; step < 4; ++step) {
        INFO("case " << c << " seed " << seed << " step " << step);
        CHECK(from_top[step].token_id == from_full[step].token_id);
      }
    }
  }
}

TEST_CASE("sampler: a top-logits row whose options need the full row is refused", "[unit][sampler]") {
  TestRow row;
  row.options.logprobs = true;
  row.options.temperature = 0;
  const std::vector<float> values = {1.0f};
  const std::vector<int64_t> ids = {0};
  SamplerRow view = row.View();
  view.top_values = values.data();
  view.top_ids = ids.data();
  at::Tensor none = at::empty({0, 10});
  CHECK_THROWS(Sampler().Sample(none, {view}));
  at::Tensor one = at::zeros({1, 10});
  CHECK_THROWS(Sampler().Sample(one, {view}));  // a full row nobody reads
}

}  // namespace
}  // namespace llmc::engine
