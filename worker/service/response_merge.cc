#include "worker/service/response_merge.h"

#include <algorithm>
#include <utility>

namespace llmc::worker {

void MergeInto(v1::GenerateResponse& earlier, v1::GenerateResponse later) {
  for (v1::TokenDelta& delta : *later.mutable_deltas()) {
    auto deltas = earlier.mutable_deltas();
    auto it = std::find_if(deltas->begin(), deltas->end(), [&delta](const v1::TokenDelta& existing) {
      return existing.choice_index() == delta.choice_index();
    });
    if (it == deltas->end()) {
      *earlier.add_deltas() = std::move(delta);
      continue;
    }
    it->mutable_token_ids()->Add(delta.token_ids().begin(), delta.token_ids().end());
    it->mutable_text()->append(delta.text());
    if (delta.has_typed()) {
      v1::TypedOutput& typed = *it->mutable_typed();
      typed.mutable_content()->append(delta.typed().content());
      typed.mutable_reasoning()->append(delta.typed().reasoning());
      for (v1::ToolCallDelta& call : *delta.mutable_typed()->mutable_tool_calls()) {
        *typed.add_tool_calls() = std::move(call);
      }
    }
    for (v1::TokenLogprob& logprob : *delta.mutable_logprobs()) *it->add_logprobs() = std::move(logprob);
    if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      it->set_finish_reason(delta.finish_reason());
      it->set_stop_reason(delta.stop_reason());
    }
  }
  if (later.has_usage()) *earlier.mutable_usage() = later.usage();
  if (earlier.prompt_token_ids().empty()) earlier.mutable_prompt_token_ids()->Swap(later.mutable_prompt_token_ids());
  if (earlier.prompt_logprobs().empty()) earlier.mutable_prompt_logprobs()->Swap(later.mutable_prompt_logprobs());
}

}  // namespace llmc::worker
