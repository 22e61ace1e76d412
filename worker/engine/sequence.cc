#include "worker/engine/sequence.h"

#include "worker/engine/sampler.h"

namespace llmc::engine {

const char* SequenceStateName(SequenceState state) {
  switch (state) {
    case SequenceState::kQueued:
      return "queued";
    case SequenceState::kPrefill:
      return "prefill";
    case SequenceState::kDecode:
      return "decode";
    case SequenceState::kFinished:
      return "finished";
    case SequenceState::kCancelled:
      return "cancelled";
    case SequenceState::kFailed:
      return "failed";
  }
  return "unknown";
}

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

}  // namespace llmc::engine
