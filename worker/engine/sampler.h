#ifndef LLMC_WORKER_ENGINE_SAMPLER_H_
#define LLMC_WORKER_ENGINE_SAMPLER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "worker/engine/sampling_options.h"

namespace llmc::engine {

// What the sampler needs to know about one row of logits (one sequence in this step).
struct SamplerRow {
  const SamplingOptions* options = nullptr;
  std::mt19937_64* rng = nullptr;                  // the sequence's own generator: same seed, same output
  absl::Span<const int32_t> prompt_token_ids;      // for the repetition penalty
  absl::Span<const int32_t> output_token_ids;      // for repetition, presence and frequency penalties
  absl::Span<const int32_t> suppressed_token_ids;  // never sampled this step (EOS / stop ids before min_tokens)
  // When set, one bit per token id over the logits' width: only ids whose bit is set may be drawn (a grammar's
  // mask, allowed_token_ids). Applied first, with the suppressed ids; logprobs stay those of the raw logits. A
  // row that arrives as its top logits with a mask had it applied by the LM head.
  const uint64_t* allowed = nullptr;
  // When set, the row's TopLogitsNeeded() largest logits (largest first, equal ones by lower id) and their ids,
  // which is all its sampling reads; the row then has no full logits.
  const float* top_values = nullptr;
  const int64_t* top_ids = nullptr;
};

// The most largest logits a step returns for sampling without the full row (greedy needs 1, top-k k).
inline constexpr int64_t kMaxTopLogitsForSampling = 64;

// How many of a row's largest logits (of a vocabulary of `vocab`) are enough to sample with `options`, or 0
// when it needs the full row: logprobs, penalties, logit_bias or suppressed tokens, and any draw that is not
// limited to the top k (k below the vocabulary and up to kMaxTopLogitsForSampling). A row with an
// allowed-token mask (a grammar, allowed_token_ids) needs its full row unless `masked_in_pass`: the LM head
// then ranks its allowed tokens only, its suppressed ids cleared from the mask.
int64_t TopLogitsNeeded(const SamplingOptions& options, bool suppresses_tokens, int64_t vocab,
                        bool masked_in_pass = false);

struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0;  // of token_id under the model's raw distribution (log_softmax of the logits)
  std::vector<std::pair<int32_t, float>> top_logprobs;  // options->top_logprobs best (id, logprob), best first
  // Beam search: the max(2 * beam_width, top_logprobs) likeliest next tokens (id, logprob), best first (equal
  // ones by lower id), their logprobs taken after penalties and suppressed tokens, as beams are scored.
  std::vector<std::pair<int32_t, float>> beam_candidates;
};

// Turns one step's logits into one token per row: the allowed mask and suppressed ids, logit_bias, penalties,
// then greedy argmax, or temperature, top-k,
// min-p, top-p and a draw from the row's generator. Logprobs are those of the raw model distribution,
// computed only when asked. Runs on the engine thread; rows are processed in parallel.
// Both ways a row can arrive draw the same token from the same generator state (sampler.cc: DrawFromTop has
// the two corner cases where they may not).
class Sampler {
 public:
  // `logits`: float32 [rows without top_values, vocab] (vocab > 0 even with no rows), CPU, contiguous, the full
  // rows in the order of the rows that need them; modified in place.
  std::vector<SampledToken> Sample(at::Tensor& logits, absl::Span<const SamplerRow> rows) const;
};

// The generator of choice `choice_index` of a request: from seed + choice_index when seeded, from the OS
// otherwise.
std::mt19937_64 MakeChoiceGenerator(const SamplingOptions& options, uint32_t choice_index);

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SAMPLER_H_
