#include "worker/engine/sequence.h"

#include "worker/engine/sampler.h"

namespace llmc::engine {

Sequence::Sequence(RequestGroup& group, uint32_t choice_index, const tokenizer::Tokenizer& tokenizer)
    : group(group),
      choice_index(choice_index),
      tokens(group.request.prompt_token_ids),
      prompt_length(static_cast<int64_t>(group.request.prompt_token_ids.size())),
      rng(MakeChoiceGenerator(group.request.sampling, choice_index)),
      detokenizer(tokenizer, group.request.sampling.skip_special_tokens),
      stop_matcher(group.request.sampling.stop, group.request.sampling.include_stop_str_in_output) {
  tokens.reserve(prompt_length + group.request.sampling.max_tokens);
}

int64_t RequestGroup::completion_tokens() const {
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
