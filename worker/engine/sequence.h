#ifndef LLMC_WORKER_ENGINE_SEQUENCE_H_
#define LLMC_WORKER_ENGINE_SEQUENCE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "llmc/v1/types.pb.h"
#include "worker/engine/beam_history.h"
#include "worker/engine/block_allocator.h"
#include "worker/engine/generation.h"
#include "worker/tokenizer/incremental_detokenizer.h"
#include "worker/tokenizer/stop_string_matcher.h"

namespace llmc::engine {

struct RequestGroup;
class ConstraintState;

// One choice of a request. Engine thread only; every field has one writer:
//   tokens, detokenizer, stop_matcher, last_token_time: the emit action (emit_action.h), or for a beam the beam
//   search action (beam_search_action.h);
//   prompt_logprobs: the prompt logprob action (prompt_logprob_action.h), emptied by the emit action;
//   num_computed, block_table, block_hashes, num_cached_prompt_tokens: the scheduler (queued, running or
//   preempted is where the scheduler keeps it);
//   finish_reason: the request table (request_table.h), the one place a choice ends.
struct Sequence {
  Sequence(RequestGroup& group, uint32_t choice_index, const tokenizer::Tokenizer& tokenizer);
  // Beam search: a new beam that extends `parent` (its output history, text and stop state; no tokens and no
  // block hashes: the beam search action lends or gives it its parent's; no blocks, nothing computed:
  // Scheduler::Fork gives it its parent's).
  Sequence(const Sequence& parent, uint32_t choice_index);

  RequestGroup& group;
  const uint32_t choice_index;
  std::vector<int32_t> tokens;  // prompt then output
  const int64_t prompt_length;
  int64_t num_computed = 0;  // leading tokens whose K/V are in the cache
  std::vector<int32_t> block_table;
  // Prefix caching: for the first full blocks of `tokens`, their chained keys and the identities under
  // which the cache holds their contents (block_allocator.h: of the block it found or cached, or of the same
  // contents cached first by another sequence), kept across preemptions as the tokens do not change; and how
  // many prompt tokens the cache held when it was last admitted. (Named for the hashes it began with; beam
  // search copies it with the tokens.)
  std::vector<BlockKey> block_hashes;
  int64_t num_cached_prompt_tokens = 0;
  std::mt19937_64 rng;
  tokenizer::IncrementalDetokenizer detokenizer;
  tokenizer::StopStringMatcher stop_matcher;
  absl::Time last_token_time = absl::InfinitePast();
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;  // set once, when the choice ends
  // An embedding request's pooled hidden states so far (the pool action, pool_action.h).
  std::vector<float> pooled;
  // Choice 0 of a request that asked for prompt logprobs: those of the prompt positions computed so far.
  std::vector<v1::TokenLogprob> prompt_logprobs;
  // A beam (beam_search_action.h, their one writer): its cumulative logprob, its output so far (tokens, text
  // and logprob entries, shared with the beams it came from and delivered when the search ends), and the
  // next tokens its last step proposed (empty until it has proposed).
  double cumulative_logprob = 0;
  BeamHistory beam_history;
  std::vector<std::pair<int32_t, float>> beam_candidates;

  int64_t num_output() const { return static_cast<int64_t>(tokens.size()) - prompt_length; }
  int64_t num_uncomputed() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
  // One token left to compute after some context: the last sampled token, or (rarely) the last prompt token
  // after a chunk that stopped one short; either way a one-token step, scheduled with the decoders.
  bool decoding() const { return num_computed > 0 && num_uncomputed() == 1; }
  absl::Span<const int32_t> prompt() const { return absl::MakeConstSpan(tokens).first(prompt_length); }
  absl::Span<const int32_t> output() const { return absl::MakeConstSpan(tokens).subspan(prompt_length); }
  bool finished() const { return finish_reason != v1::FINISH_REASON_UNSPECIFIED; }
  bool pools() const;
  // Choice 0 computes the prompt's logprobs until its first token goes out with them. Meanwhile its prefill
  // chunks are capped (every chunk position needs a full logits row) and the other choices wait, so that
  // no choice's first token can overtake the prompt logprobs.
  bool collects_prompt_logprobs() const;
  // Whether it may start after a cached prefix: not while it needs every prompt position's logits (prompt
  // logprobs) or hidden state (mean pooling).
  bool may_use_cached_prefix() const;
  // How many of the next `num_tokens` positions predict a prompt token whose logprob this sequence collects.
  int64_t PromptLogprobRows(int64_t num_tokens) const;
};

// A beam that met a stop condition, kept while it is among its request's beam_width best finished ones.
struct FinishedBeam {
  BeamHistory output;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  std::string stop_reason;
  double score = 0;
};

// A beam search request's state beside its live beams (RequestGroup::sequences).
struct BeamSearchState {
  uint32_t next_choice_index = 1;      // of the next beam: keeps the scheduler's arrival order
  std::vector<FinishedBeam> finished;  // best first, at most beam_width
  // The token vectors of beams that ended without a new beam, kept (at most beam_width) to be rewritten from
  // where their outputs part for later new beams instead of copying the prompt again (beam_search_action.h).
  struct SpareTokens {
    std::vector<int32_t> tokens;
    BeamHistory output;
  };
  std::vector<SpareTokens> spare_tokens;
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;  // of the beams returned, once the search has ended
};

// One submitted request: its `n` choices (or its live beams) and where their output goes.
struct RequestGroup {
  uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<GenerationSink> sink;
  std::vector<std::unique_ptr<Sequence>> sequences;
  absl::Time arrival_time;
  bool running = false;  // a choice has been scheduled, so the request no longer counts against max_waiting
  std::unique_ptr<BeamSearchState> beam;        // set for beam search
  std::unique_ptr<ConstraintState> constraint;  // set for structured output (constraint_state.h)

  RequestGroup();
  ~RequestGroup();

  int64_t prompt_tokens() const { return static_cast<int64_t>(request.prompt_token_ids.size()); }
  int64_t cached_prompt_tokens() const;
  int64_t completion_tokens() const;
  int num_unfinished() const;
};

inline bool Sequence::pools() const { return group.request.pooling != Pooling::kNone; }

inline bool Sequence::collects_prompt_logprobs() const {
  return choice_index == 0 && group.request.sampling.prompt_logprobs.has_value() && num_output() == 0 && !finished() &&
         !pools();
}

inline bool Sequence::may_use_cached_prefix() const {
  return !collects_prompt_logprobs() && group.request.pooling != Pooling::kMean;
}

inline int64_t Sequence::PromptLogprobRows(int64_t num_tokens) const {
  if (!collects_prompt_logprobs()) return 0;
  // The row of position p predicts token p + 1.
  return std::max<int64_t>(0, std::min(num_computed + num_tokens, prompt_length - 1) - num_computed);
}

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SEQUENCE_H_
