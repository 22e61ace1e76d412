#include "worker/engine/sampler.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"

namespace llmc::engine {
namespace {

constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// A token still in the running, weighted exp((logit - max_logit) / temperature): the best token weighs 1.
struct Candidate {
  float weight;
  int32_t id;
};

// Heavier first; on equal weight the lower id first, so every cut is deterministic.
bool Heavier(const Candidate& a, const Candidate& b) {
  return a.weight > b.weight || (a.weight == b.weight && a.id < b.id);
}

// Per-thread buffers, grown to the vocabulary by the first row that needs them and reused for the rest.
struct Scratch {
  std::vector<float> weights;
  std::vector<Candidate> candidates;
  std::vector<int32_t> counts;  // all zero between uses
};

// The raw values of the logits this step changes, kept only when logprobs are asked for.
using RawLogits = absl::flat_hash_map<int32_t, float>;

float& LogitAt(float* logits, int64_t vocab, int32_t id, RawLogits* raw) {
  TORCH_CHECK(id >= 0 && id < vocab, "sampler: token id ", id, " outside the vocabulary of ", vocab);
  if (raw != nullptr) raw->try_emplace(id, logits[id]);
  return logits[id];
}

// vLLM's order: repetition (prompt and output, each distinct token once), then frequency and presence
// (output only). Touches only the ids named; `counts` is zero again on return.
void ApplyPenalties(const SamplerRow& row, float* logits, int64_t vocab, std::vector<int32_t>& counts, RawLogits* raw) {
  const SamplingOptions& options = *row.options;
  const bool repetition = options.repetition_penalty != 1.0f;
  const bool occurrence = options.presence_penalty != 0.0f || options.frequency_penalty != 0.0f;
  if (!repetition && !occurrence) return;
  counts.resize(vocab);
  if (repetition) {
    const float penalty = options.repetition_penalty;
    for (const absl::Span<const int32_t> ids : {row.prompt_token_ids, row.output_token_ids}) {
      for (const int32_t id : ids) {
        float& logit = LogitAt(logits, vocab, id, raw);
        if (counts[id]++ == 0) logit = logit > 0 ? logit / penalty : logit * penalty;
      }
    }
    for (const absl::Span<const int32_t> ids : {row.prompt_token_ids, row.output_token_ids}) {
      for (const int32_t id : ids) counts[id] = 0;
    }
  }
  if (!occurrence) return;
  for (const int32_t id : row.output_token_ids) {
    LogitAt(logits, vocab, id, raw);  // checks the id before it indexes `counts`
    ++counts[id];
  }
  for (const int32_t id : row.output_token_ids) {
    if (counts[id] == 0) continue;  // a repeat, already penalised
    logits[id] -= options.frequency_penalty * static_cast<float>(counts[id]);
    logits[id] -= options.presence_penalty;
    counts[id] = 0;
  }
}

at::Tensor RowTensor(const float* logits, int64_t vocab) {
  return at::from_blob(const_cast<float*>(logits), {vocab});  // only ever read
}

// exp((logits - max_logit) / temperature) into `weights`, through ATen's vectorised kernels (several times
// faster than std::exp in a loop).
void ComputeWeights(const float* logits, int64_t vocab, float max_logit, float temperature,
                    std::vector<float>& weights) {
  weights.resize(vocab);
  at::Tensor out = at::from_blob(weights.data(), {vocab});
  at::sub_out(out, RowTensor(logits, vocab), max_logit);
  if (temperature != 1.0f) out.div_(temperature);
  out.exp_();
}

double LogSumExp(const float* logits, int64_t vocab, std::vector<float>& weights) {
  const float max_logit = RowTensor(logits, vocab).max().item<float>();
  if (!std::isfinite(max_logit)) return max_logit;
  ComputeWeights(logits, vocab, max_logit, 1.0f, weights);
  return max_logit + std::log(at::from_blob(weights.data(), {vocab}).sum(at::kDouble).item<double>());
}

// The `count` largest logits as (id, logprob), best first; on equal logits the lower id first.
std::vector<std::pair<int32_t, float>> TopLogprobs(const float* logits, int64_t vocab, uint32_t count,
                                                   double log_normalizer) {
  std::vector<std::pair<int32_t, float>> top;
  const size_t size = std::min<size_t>(count, static_cast<size_t>(vocab));
  if (size == 0) return top;
  top.reserve(size + 1);
  for (int64_t i = 0; i < vocab; ++i) {
    const float logit = logits[i];
    // Ids arrive in increasing order, so an equal logit never displaces one already kept.
    if (top.size() == size && !(logit > top.back().second)) continue;
    const auto position =
        std::find_if(top.begin(), top.end(), [logit](const auto& entry) { return entry.second < logit; });
    top.insert(position, {static_cast<int32_t>(i), logit});
    if (top.size() > size) top.pop_back();
  }
  for (auto& entry : top) entry.second = static_cast<float>(entry.second - log_normalizer);
  return top;
}

int32_t Argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// Keeps the smallest heaviest-first prefix whose mass reaches `target`, without sorting everything: a
// weighted quickselect splits off heaviest parts until the boundary lies among at most 64 candidates, which
// are then sorted. The first split guesses that the 64 heaviest suffice, as they usually do.
void CutTopP(std::vector<Candidate>& candidates, double target) {
  constexpr size_t kSorted = 64;
  // Invariant: [0, low) outweighs the rest and holds `before` of the mass, short of the target; the
  // boundary lies in [low, high).
  size_t low = 0;
  size_t high = candidates.size();
  double before = 0;
  for (size_t split = std::min(kSorted, high); high - low > kSorted; split = low + (high - low) / 2) {
    std::nth_element(candidates.begin() + low, candidates.begin() + split, candidates.begin() + high, Heavier);
    double mass = 0;
    for (size_t i = low; i < split; ++i) mass += candidates[i].weight;
    if (before + mass >= target) {
      high = split;
    } else {
      before += mass;
      low = split;
    }
  }
  std::sort(candidates.begin() + low, candidates.begin() + high, Heavier);
  for (size_t i = low; i < high; ++i) {
    before += candidates[i].weight;
    if (before >= target) {
      candidates.resize(i + 1);
      return;
    }
  }
  candidates.resize(high);  // short only by rounding: keep the whole range
}

double Mass(const std::vector<Candidate>& candidates) {
  double mass = 0;
  for (const Candidate& candidate : candidates) mass += candidate.weight;
  return mass;
}

// The tokens weighing at least `bar` (> 0); returns their mass.
double Gather(const std::vector<float>& weights, float bar, std::vector<Candidate>& candidates) {
  candidates.clear();
  double mass = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] >= bar) {
      candidates.push_back({weights[i], static_cast<int32_t>(i)});
      mass += weights[i];
    }
  }
  return mass;
}

// The `k` heaviest tokens weighing at least `bar` (> 0), in one pass: a buffer of up to 2k is cut back to
// the k heaviest whenever it fills, and the bar rises past the lightest of them.
void GatherTopK(const std::vector<float>& weights, float bar, size_t k, std::vector<Candidate>& candidates) {
  candidates.clear();
  const auto cut = [&] {
    std::nth_element(candidates.begin(), candidates.begin() + (k - 1), candidates.end(), Heavier);
    candidates.resize(k);
    // Later tokens have higher ids, so one merely equal to the k-th weight would lose the tie.
    bar = std::nextafter(candidates[k - 1].weight, std::numeric_limits<float>::infinity());
  };
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] < bar) continue;
    candidates.push_back({weights[i], static_cast<int32_t>(i)});
    if (candidates.size() == 2 * k) cut();
  }
  if (candidates.size() > k) cut();
}

// The nucleus lies within the tokens weighing at least some bar once their mass reaches `target`; the
// heaviest bar that qualifies keeps the candidates few (a thousandth of the best token's weight usually does).
void GatherNucleus(const std::vector<float>& weights, double target, std::vector<Candidate>& candidates) {
  for (const float bar : {1e-3f, 1e-7f, 1e-12f}) {
    if (Gather(weights, bar, candidates) >= target) return;
  }
  Gather(weights, std::numeric_limits<float>::denorm_min(), candidates);
}

// Picks an index of `weights` (non-negative; `weight(element)` reads one) with probability proportional to
// its weight, or nullopt when none weighs anything.
template <typename Range, typename Weight>
std::optional<size_t> DrawIndex(const Range& weights, Weight weight, std::mt19937_64& rng) {
  double total = 0;
  for (const auto& element : weights) total += weight(element);
  if (!(total > 0)) return std::nullopt;
  const double point = std::uniform_real_distribution<double>(0.0, total)(rng);
  double cumulative = 0;
  std::optional<size_t> last_drawable;
  for (size_t i = 0; i < weights.size(); ++i) {
    const float w = weight(weights[i]);
    if (w <= 0) continue;
    cumulative += w;
    if (point < cumulative) return i;
    last_drawable = i;
  }
  return last_drawable;  // the point landed on the rounding error at the very end
}

int32_t Draw(const float* logits, int64_t vocab, const SamplingOptions& options, std::mt19937_64& rng,
             Scratch& scratch) {
  const float max_logit = RowTensor(logits, vocab).max().item<float>();
  if (!std::isfinite(max_logit)) return Argmax(logits, vocab);  // all suppressed, an infinite or a NaN logit
  ComputeWeights(logits, vocab, max_logit, options.temperature, scratch.weights);
  const std::vector<float>& weights = scratch.weights;
  // The best token weighs exactly 1, so min-p's bar (min_p × the largest probability) is min_p itself.
  // Tokens whose weight underflowed to 0 could never be drawn and are dropped with them.
  const float floor = std::max(options.min_p, std::numeric_limits<float>::denorm_min());
  std::vector<Candidate>& candidates = scratch.candidates;
  if (options.top_k > 0 && options.top_k < vocab) {
    GatherTopK(weights, floor, static_cast<size_t>(options.top_k), candidates);
    std::sort(candidates.begin(), candidates.end(), Heavier);  // the order DrawFromTop sees
    if (options.top_p < 1.0f) CutTopP(candidates, options.top_p * Mass(candidates));
  } else if (options.min_p > 0.0f) {
    const double mass = Gather(weights, floor, candidates);
    if (options.top_p < 1.0f) CutTopP(candidates, options.top_p * mass);
  } else if (options.top_p < 1.0f) {
    const double total = at::from_blob(scratch.weights.data(), {vocab}).sum(at::kDouble).item<double>();
    const double target = options.top_p * total;
    GatherNucleus(weights, target, candidates);
    CutTopP(candidates, target);
  } else {
    const auto drawn = DrawIndex(
        weights, [](float weight) { return weight; }, rng);
    return drawn.has_value() ? static_cast<int32_t>(*drawn) : Argmax(logits, vocab);
  }
  const auto drawn = DrawIndex(
      candidates, [](const Candidate& candidate) { return candidate.weight; }, rng);
  return drawn.has_value() ? candidates[*drawn].id : Argmax(logits, vocab);
}

// Draw() for a row that arrives as its largest logits only: the same candidates in the same order, so the
// same token for the same generator state. Two exceptions, both outside what a working model produces: two
// different logits whose weights round equal exactly at the k-th place (Draw keeps the lower id, this the
// larger logit), and rows with NaN logits (never among the top logits; Draw falls back to Argmax).
int32_t DrawFromTop(const SamplerRow& row, Scratch& scratch) {
  const SamplingOptions& options = *row.options;
  const int64_t k = options.top_k;
  const float max_logit = row.top_values[0];
  if (!std::isfinite(max_logit)) return static_cast<int32_t>(row.top_ids[0]);
  ComputeWeights(row.top_values, k, max_logit, options.temperature, scratch.weights);
  const float floor = std::max(options.min_p, std::numeric_limits<float>::denorm_min());
  std::vector<Candidate>& candidates = scratch.candidates;
  candidates.clear();
  for (int64_t i = 0; i < k; ++i) {
    if (scratch.weights[i] >= floor) candidates.push_back({scratch.weights[i], static_cast<int32_t>(row.top_ids[i])});
  }
  std::sort(candidates.begin(), candidates.end(), Heavier);
  if (options.top_p < 1.0f) CutTopP(candidates, options.top_p * Mass(candidates));
  const auto drawn = DrawIndex(
      candidates, [](const Candidate& candidate) { return candidate.weight; }, *row.rng);
  return drawn.has_value() ? candidates[*drawn].id : static_cast<int32_t>(row.top_ids[0]);
}

SampledToken SampleFromTop(const SamplerRow& row, int64_t vocab, Scratch& scratch) {
  TORCH_CHECK(row.options != nullptr && row.top_ids != nullptr, "sampler: row without options or top logits");
  TORCH_CHECK(TopLogitsNeeded(*row.options, !row.suppressed_token_ids.empty(), vocab, row.allowed != nullptr) > 0,
              "sampler: this row's sampling needs its full logits");
  SampledToken result;
  if (row.options->greedy()) {
    result.token_id = static_cast<int32_t>(row.top_ids[0]);
  } else {
    TORCH_CHECK(row.rng != nullptr, "sampler: a sampled row needs a generator");
    result.token_id = DrawFromTop(row, scratch);
  }
  return result;
}

// The allowed mask, the suppressed ids, then logit_bias: what the draw may pick, and how it leans.
void RestrictAndBias(const SamplerRow& row, float* logits, int64_t vocab, RawLogits* raw) {
  if (row.allowed != nullptr) {
    // Disallowed tokens never become the draw, so their raw values need no keeping for logprobs.
    const int64_t words = (vocab + 63) / 64;
    for (int64_t w = 0; w < words; ++w) {
      uint64_t blocked = ~row.allowed[w];
      if (blocked == 0) continue;
      const int64_t base = w * 64;
      if (base + 64 > vocab) blocked &= (uint64_t{1} << (vocab - base)) - 1;
      while (blocked != 0) {
        logits[base + __builtin_ctzll(blocked)] = kNegativeInfinity;
        blocked &= blocked - 1;
      }
    }
  }
  for (const int32_t id : row.suppressed_token_ids) LogitAt(logits, vocab, id, raw) = kNegativeInfinity;
  for (const auto& [id, bias] : row.options->logit_bias) {
    if (id < vocab) LogitAt(logits, vocab, id, raw) += bias;
  }
}

// A beam's proposals: the likeliest tokens of the processed distribution; the first is its "sample".
SampledToken ProposeBeamTokens(const SamplerRow& row, float* logits, int64_t vocab, Scratch& scratch) {
  const SamplingOptions& options = *row.options;
  RestrictAndBias(row, logits, vocab, nullptr);
  ApplyPenalties(row, logits, vocab, scratch.counts, nullptr);
  const double log_normalizer = LogSumExp(logits, vocab, scratch.weights);
  SampledToken result;
  result.beam_candidates =
      TopLogprobs(logits, vocab, std::max<uint32_t>(2 * options.beam_width, options.top_logprobs), log_normalizer);
  TORCH_CHECK(!result.beam_candidates.empty(), "sampler: no beam candidates");
  result.token_id = result.beam_candidates.front().first;
  result.logprob = result.beam_candidates.front().second;
  return result;
}

SampledToken SampleRow(const SamplerRow& row, float* logits, int64_t vocab, Scratch& scratch) {
  TORCH_CHECK(row.options != nullptr, "sampler: row without options");
  const SamplingOptions& options = *row.options;
  if (options.beam_search()) return ProposeBeamTokens(row, logits, vocab, scratch);
  SampledToken result;
  const bool with_logprobs = options.logprobs || options.top_logprobs > 0;
  double log_normalizer = 0;
  RawLogits raw;
  if (with_logprobs) {
    log_normalizer = LogSumExp(logits, vocab, scratch.weights);
    result.top_logprobs = TopLogprobs(logits, vocab, options.top_logprobs, log_normalizer);
  }
  RawLogits* const raw_or_null = with_logprobs ? &raw : nullptr;

  RestrictAndBias(row, logits, vocab, raw_or_null);
  ApplyPenalties(row, logits, vocab, scratch.counts, raw_or_null);

  if (options.greedy()) {
    result.token_id = Argmax(logits, vocab);
  } else {
    TORCH_CHECK(row.rng != nullptr, "sampler: a sampled row needs a generator");
    result.token_id = Draw(logits, vocab, options, *row.rng, scratch);
  }
  if (with_logprobs) {
    const auto changed = raw.find(result.token_id);
    const float raw_logit = changed == raw.end() ? logits[result.token_id] : changed->second;
    result.logprob = static_cast<float>(raw_logit - log_normalizer);
  }
  return result;
}

}  // namespace

int64_t TopLogitsNeeded(const SamplingOptions& options, bool suppresses_tokens, int64_t vocab, bool masked_in_pass) {
  const bool masked = options.constrained || !options.allowed_token_mask.empty();
  if ((masked || suppresses_tokens) && !masked_in_pass) return 0;
  if (!options.logit_bias.empty() || options.beam_search() || options.logprobs || options.top_logprobs > 0 ||
      options.repetition_penalty != 1.0f || options.presence_penalty != 0.0f || options.frequency_penalty != 0.0f) {
    return 0;
  }
  if (options.greedy()) return 1;
  // Draw() treats a top_k of the whole vocabulary or more as no top_k at all.
  if (options.top_k > 0 && options.top_k < vocab && options.top_k <= kMaxTopLogitsForSampling) return options.top_k;
  return 0;
}

std::vector<SampledToken> Sampler::Sample(at::Tensor& logits, absl::Span<const SamplerRow> rows) const {
  TORCH_CHECK(
      logits.dim() == 2 && logits.scalar_type() == at::kFloat && logits.device().is_cpu() && logits.is_contiguous(),
      "sampler: logits must be a contiguous float32 CPU matrix");
  // Row r's full logits, or nullptr for a row sampled from its top logits.
  std::vector<float*> full(rows.size(), nullptr);
  const int64_t vocab = logits.size(1);
  int64_t next_full = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].top_ids != nullptr) continue;
    TORCH_CHECK(next_full < logits.size(0), "sampler: ", logits.size(0), " logit rows for more sampler rows");
    full[r] = logits.data_ptr<float>() + next_full++ * vocab;
  }
  TORCH_CHECK(next_full == logits.size(0), "sampler: ", logits.size(0), " logit rows for ", next_full,
              " sampler rows that need them");
  TORCH_CHECK(vocab > 0, "sampler: empty vocabulary");
  std::vector<SampledToken> results(rows.size());
  // Each row reads only its own logits and generator, so the result does not depend on how rows are split.
  at::parallel_for(0, static_cast<int64_t>(rows.size()), 1, [&](int64_t begin, int64_t end) {
    c10::InferenceMode no_autograd;  // the few ATen calls per row need no autograd bookkeeping
    Scratch scratch;
    for (int64_t r = begin; r < end; ++r) {
      results[r] =
          full[r] != nullptr ? SampleRow(rows[r], full[r], vocab, scratch) : SampleFromTop(rows[r], vocab, scratch);
    }
  });
  return results;
}

std::mt19937_64 MakeChoiceGenerator(const SamplingOptions& options, uint32_t choice_index) {
  if (options.seed.has_value()) return std::mt19937_64(*options.seed + choice_index);
  std::random_device device;
  return std::mt19937_64((static_cast<uint64_t>(device()) << 32) | device());
}

}  // namespace llmc::engine
