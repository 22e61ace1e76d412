#include "worker/engine/emit_action.h"

#include <algorithm>
#include <utility>

namespace llmc::engine {

void EmitAction::AddPromptLogprobs(Sequence& sequence, v1::GenerateResponse& response) const {
  // Nothing predicts the first token: its entry names it only.
  output_.DescribeToken(sequence.tokens.front(), *response.add_prompt_logprobs());
  for (v1::TokenLogprob& entry : sequence.prompt_logprobs) *response.add_prompt_logprobs() = std::move(entry);
  std::vector<v1::TokenLogprob>().swap(sequence.prompt_logprobs);
}

void EmitAction::Run(StepData& step) {
  const absl::Time now = absl::Now();
  pending_.clear();
  for (size_t k = 0; k < step.sampling.size(); ++k) {
    Sequence& sequence = *step.sampling[k];
    RequestGroup& group = sequence.group;
    if (observer_ != nullptr) {
      if (group.completion_tokens() == 0) {
        observer_->OnFirstToken(now - group.arrival_time);
      } else if (sequence.last_token_time != absl::InfinitePast()) {
        observer_->OnInterToken(now - sequence.last_token_time);
      }
    }
    const bool first_of_collector = sequence.collects_prompt_logprobs();
    v1::TokenDelta delta = output_.Append(sequence, step.sampled[k]);
    sequence.last_token_time = now;
    // A step has at most max_running rows, so a linear search is cheap.
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&group](const PendingResponse& pending) { return pending.group == &group; });
    if (it == pending_.end()) it = pending_.insert(pending_.end(), PendingResponse{&group});
    if (first_of_collector) AddPromptLogprobs(sequence, it->response);
    if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      table_.FinishChoice(sequence, delta.finish_reason());
      it->last_finish_reason = delta.finish_reason();
    }
    *it->response.add_deltas() = std::move(delta);
  }
  for (PendingResponse& pending : pending_) {
    table_.Respond(*pending.group, std::move(pending.response), pending.last_finish_reason);
  }
  pending_.clear();
}

}  // namespace llmc::engine
