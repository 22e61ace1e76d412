#ifndef LLMC_WORKER_ENGINE_SAMPLING_OPTIONS_H_
#define LLMC_WORKER_ENGINE_SAMPLING_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llmc/v1/types.pb.h"

namespace llmc::engine {

// One request's sampling settings with every default resolved and every range checked
// (worker/service/request_conversion.cc builds them from the proto's SamplingParams).
struct SamplingOptions {
  uint32_t max_tokens = 16;         // generated tokens per choice
  uint32_t min_tokens = 0;          // EOS and stop token ids are suppressed until this many
  float temperature = 1.0f;         // 0: greedy
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0: disabled
  float min_p = 0.0f;               // [0, 1]; 0: disabled
  float repetition_penalty = 1.0f;  // > 0; 1: none (prompt and output tokens, as in vLLM)
  float presence_penalty = 0.0f;    // [-2, 2] (output tokens)
  float frequency_penalty = 0.0f;   // [-2, 2] (output tokens)
  std::optional<uint64_t> seed;     // choice i samples from seed + i
  std::vector<std::string> stop;    // stop strings, never in the output unless include_stop_str_in_output
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool logprobs = false;
  uint32_t top_logprobs = 0;  // 0..20
  // Set: the log-probability of every prompt token, with this many alternatives (0..20) per position.
  std::optional<uint32_t> prompt_logprobs;
  uint32_t n = 1;  // parallel choices
  bool skip_special_tokens = true;
  // Special tokens decoded even with skip_special_tokens: those that delimit tool calls or reasoning while
  // the output is parsed (docs/tool-calling.md). Sorted.
  std::vector<int32_t> decoded_special_tokens;
  bool include_stop_str_in_output = false;
  // Beam search (beam_search_action.h) over this many beams; 0: none. Then temperature is 0, n <= beam_width,
  // and prompt_logprobs is unset.
  uint32_t beam_width = 0;
  float length_penalty = 1.0f;
  v1::BeamEarlyStopping early_stopping = v1::BEAM_EARLY_STOPPING_HEURISTIC;
  // Structured output: a grammar (GenerationRequest::constraint) masks each draw.
  bool constrained = false;
  // OpenAI's logit_bias: (token id, bias) sorted by id, added to the logits before sampling.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's allowed_token_ids as one bit per id over the model's vocabulary; empty: no restriction.
  std::vector<uint64_t> allowed_token_mask;
  // vLLM's bad_words, tokenized: a word's last token is banned wherever the output ends with its other tokens.
  std::vector<std::vector<int32_t>> bad_words;

  bool greedy() const { return temperature == 0.0f; }
  bool beam_search() const { return beam_width > 0; }
  // Some tokens are masked or biased before the draw.
  bool masks_logits() const { return constrained || !logit_bias.empty() || !allowed_token_mask.empty(); }
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SAMPLING_OPTIONS_H_
