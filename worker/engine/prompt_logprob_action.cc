#include "worker/engine/prompt_logprob_action.h"

#include <ATen/ATen.h>

namespace llmc::engine {

void PromptLogprobAction::Run(StepData& step) {
  if (step.prompt_logprobs.empty()) return;
  int64_t num_rows = 0;
  for (const StepData::PromptLogprobChunk& chunk : step.prompt_logprobs) num_rows += chunk.num_rows;
  const at::Tensor logprobs =
      at::log_softmax(step.full_logits.narrow(0, step.num_full_sampling_rows, num_rows), /*dim=*/1).contiguous();
  const int64_t vocab = logprobs.size(1);

  int64_t first_row = 0;
  for (const StepData::PromptLogprobChunk& chunk : step.prompt_logprobs) {
    Sequence& sequence = *chunk.sequence;
    if (chunk.first_position == 0) sequence.prompt_logprobs.clear();
    const at::Tensor rows = logprobs.narrow(0, first_row, chunk.num_rows);
    first_row += chunk.num_rows;
    const at::Tensor targets =
        at::from_blob(sequence.tokens.data() + chunk.first_position + 1, {chunk.num_rows}, at::kInt).to(at::kLong);
    const at::Tensor target_logprobs = rows.gather(1, targets.unsqueeze(1));
    // Rank 1 is the most likely token; equally likely tokens share a rank.
    const at::Tensor ranks = (rows > target_logprobs).sum(1).add_(1);
    const int64_t top = std::min<int64_t>(*sequence.group.request.sampling.prompt_logprobs, vocab);
    const auto [top_values, top_ids] = rows.topk(top, /*dim=*/1);

    const auto target_accessor = target_logprobs.accessor<float, 2>();
    const auto rank_accessor = ranks.accessor<int64_t, 1>();
    const auto value_accessor = top_values.accessor<float, 2>();
    const auto id_accessor = top_ids.accessor<int64_t, 2>();
    for (int64_t r = 0; r < chunk.num_rows; ++r) {
      v1::TokenLogprob& entry = sequence.prompt_logprobs.emplace_back();
      output_.DescribeToken(sequence.tokens[chunk.first_position + r + 1], entry);
      entry.set_logprob(target_accessor[r][0]);
      entry.set_rank(static_cast<uint32_t>(rank_accessor[r]));
      for (int64_t k = 0; k < top; ++k) {
        v1::TopLogprob* alternative = entry.add_top();
        output_.DescribeToken(static_cast<int32_t>(id_accessor[r][k]), *alternative);
        alternative->set_logprob(value_accessor[r][k]);
      }
    }
  }
}

}  // namespace llmc::engine
