#include "worker/engine/forward_action.h"

#include <algorithm>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "common/fault_injection.h"

namespace llmc::engine {

void ForwardAction::PlanRows(StepData& step) {
  for (const ScheduledChunk& chunk : step.plan.chunks) {
    Sequence& sequence = *chunk.sequence;
    if (!sequence.pools()) {
      if (chunk.samples) step.sampling.push_back(&sequence);
      continue;
    }
    // The rows the batch builder names for this chunk, in the same order.
    const bool mean = sequence.group.request.pooling == Pooling::kMean;
    const int64_t rows = mean ? chunk.num_tokens : (chunk.samples ? 1 : 0);
    step.pooling.push_back({&sequence, rows, sequence.num_computed == 0, chunk.samples});
  }
  const size_t num_rows = step.sampling.size();
  if (step.suppressed.size() < num_rows) step.suppressed.resize(num_rows);
  step.top_needed.assign(num_rows, 0);
  full_rows_.clear();
  const int64_t vocab_size = model_.manifest().vocab_size;
  for (size_t k = 0; k < num_rows; ++k) output_.SuppressedTokens(*step.sampling[k], step.suppressed[k]);
  row_masks_.Fill(step.sampling, step.suppressed, vocab_size, step.mask_words, step.row_masks);
  for (size_t k = 0; k < num_rows; ++k) {
    const Sequence& sequence = *step.sampling[k];
    const bool masked_in_pass = step.row_masks[k] != nullptr && model_.masks_logits_in_pass();
    step.top_needed[k] =
        TopLogitsNeeded(sequence.group.request.sampling, !step.suppressed[k].empty(), vocab_size, masked_in_pass);
    if (step.top_needed[k] == 0) full_rows_.push_back(static_cast<int64_t>(k));
    step.top_k = std::max(step.top_k, step.top_needed[k]);
  }
  step.num_full_sampling_rows = static_cast<int64_t>(full_rows_.size());
  // The batch builder puts these rows after the sampling rows, in chunk order; all of them are full rows.
  int64_t next_row = static_cast<int64_t>(num_rows);
  for (const ScheduledChunk& chunk : step.plan.chunks) {
    const int64_t rows = chunk.sequence->PromptLogprobRows(chunk.num_tokens);
    if (rows == 0) continue;
    step.prompt_logprobs.push_back({chunk.sequence, chunk.sequence->num_computed, rows});
    for (int64_t r = 0; r < rows; ++r) full_rows_.push_back(next_row++);
  }
}

void ForwardAction::CopyBlocks(const std::vector<std::pair<int32_t, int32_t>>& copies) {
  if (copies.empty()) return;
  std::vector<int64_t> from, to;
  for (const auto& [source, destination] : copies) {
    from.push_back(source);
    to.push_back(destination);
  }
  // The cache is [layers, 2, blocks, block_size, kv_heads, head_dim] (LoadedModel::AllocateKvCache).
  const at::Tensor sources = at::tensor(from, at::kLong).to(kv_cache_.device());
  const at::Tensor destinations = at::tensor(to, at::kLong).to(kv_cache_.device());
  kv_cache_.index_copy_(2, destinations, kv_cache_.index_select(2, sources));
}

absl::Status ForwardAction::RunModel(const model::ForwardBatch& batch, StepData& step) {
  if (FaultInjected("model_step")) return absl::InternalError("injected fault: model_step");
  if (FaultInjected("model_step_throw")) throw std::runtime_error("injected fault: model_step_throw");
  CopyBlocks(step.plan.block_copies);
  const at::Tensor full_rows =
      at::from_blob(full_rows_.data(), {static_cast<int64_t>(full_rows_.size())}, at::TensorOptions(at::kLong));
  const bool masked =
      std::any_of(step.row_masks.begin(), step.row_masks.end(), [](const uint64_t* mask) { return mask != nullptr; });
  absl::StatusOr<model::SamplingLogits> logits =
      model_.ForwardForSampling(batch, kv_cache_, full_rows, step.top_k, masked ? &step.row_masks : nullptr);
  if (!logits.ok()) return absl::InternalError(logits.status().message());
  step.full_logits = logits->full_logits.to(at::kCPU).contiguous();
  step.top_values = logits->top_values.to(at::kCPU).contiguous();
  step.top_ids = logits->top_ids.to(at::kCPU).contiguous();
  if (logits->hidden.defined()) step.hidden = logits->hidden.to(at::kCPU).contiguous();
  return absl::OkStatus();
}

absl::Status ForwardAction::Run(StepData& step) {
  PlanRows(step);
  const model::ForwardBatch batch = batch_builder_.Build(step.plan.chunks);
  const absl::Time start = absl::Now();
  absl::Status status;
  try {
    status = RunModel(batch, step);
  } catch (const std::exception& error) {
    status = absl::InternalError(absl::StrCat("the model step threw: ", error.what()));
  }
  step.model_time = absl::Now() - start;
  if (status.ok()) scheduler_.Computed(step.plan);
  return status;
}

}  // namespace llmc::engine
