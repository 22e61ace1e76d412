#include "worker/engine/sequence.h"

#include "worker/engine/constraint_state.h"
#include "worker/engine/sampler.h"

namespace llmc::engine {

RequestGroup::RequestGroup() = default;
RequestGroup::~RequestGroup() = default;

Sequence::Sequence(RequestGroup& group, uint32_t choice_index, const tokenizer::Tokenizer& tokenizer)
    : group(group),
      choice_index(choice_index),
      tokens(group.request.prompt_token_ids),
      prompt_length(static_cast<int64_t>(group.request.prompt_token_ids.size())),
      rng(MakeChoiceGenerator(group.request.sampling, choice_index)),
      detokenizer(tokenizer, group.request.sampling.skip_special_tokens, group.request.sampling.decoded_special_tokens),
      stop_matcher(group.request.sampling.stop, group.request.sampling.include_stop_str_in_output) {
  tokens.reserve(prompt_length + group.request.sampling.max_tokens);
}

Sequence::Sequence(const Sequence& parent, uint32_t choice_index)
    : group(parent.group),
      choice_index(choice_index),
      prompt_length(parent.prompt_length),
      num_cached_prompt_tokens(parent.num_cached_prompt_tokens),
      rng(parent.rng),
      detokenizer(parent.detokenizer),
      stop_matcher(parent.stop_matcher),
      last_token_time(parent.last_token_time),
      cumulative_logprob(parent.cumulative_logprob),
      beam_history(parent.beam_history) {}

int64_t RequestGroup::cached_prompt_tokens() const {
  if (!sequences.empty()) return sequences.front()->num_cached_prompt_tokens;
  return beam != nullptr ? beam->cached_prompt_tokens : 0;
}

int64_t RequestGroup::completion_tokens() const {
  if (beam != nullptr && sequences.empty()) return beam->completion_tokens;
  int64_t total = 0;
  for (const auto& sequence : sequences) total += sequence->num_output();
  return total;
}

int RequestGroup::num_unfinished() const {
  int count = 0;
  for (const auto& sequence : sequences) count += sequence->finished() ? 0 : 1;
  return count;
}

}  // namespace llmc::engine
