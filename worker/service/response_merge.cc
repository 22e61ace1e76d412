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
  // Parts of a long prompt's logprobs (SplitPromptLogprobs) come in order.
  for (v1::TokenLogprob& entry : *later.mutable_prompt_logprobs()) *earlier.add_prompt_logprobs() = std::move(entry);
}

std::vector<v1::GenerateResponse> SplitPromptLogprobs(v1::GenerateResponse response, size_t max_part_bytes) {
  std::vector<v1::GenerateResponse> parts;
  auto& entries = *response.mutable_prompt_logprobs();
  if (entries.size() < 2 || response.ByteSizeLong() <= max_part_bytes) {
    parts.push_back(std::move(response));
    return parts;
  }
  // A field tag and a length before each entry.
  constexpr size_t kEntryOverhead = 6;
  size_t remaining = 0;
  for (const v1::TokenLogprob& entry : entries) remaining += entry.ByteSizeLong() + kEntryOverhead;
  int taken = 0;
  while (remaining > max_part_bytes && taken < entries.size()) {
    v1::GenerateResponse part;
    size_t part_bytes = 0;
    while (taken < entries.size()) {
      const size_t bytes = entries[taken].ByteSizeLong() + kEntryOverhead;
      if (part.prompt_logprobs_size() > 0 && part_bytes + bytes > max_part_bytes) break;
      part_bytes += bytes;
      remaining -= bytes;
      *part.add_prompt_logprobs() = std::move(entries[taken++]);
    }
    parts.push_back(std::move(part));
  }
  entries.DeleteSubrange(0, taken);
  parts.push_back(std::move(response));
  return parts;
}

}  // namespace llmc::worker
