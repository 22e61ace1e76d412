#include "worker/engine/sample_action.h"

#include <algorithm>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/engine/constraint_state.h"

namespace llmc::engine {

const uint64_t* SampleAction::FillMask(const Sequence& sequence, size_t k, int64_t vocab) {
  const SamplingOptions& options = sequence.group.request.sampling;
  ConstraintState* constraint = sequence.group.constraint.get();
  if (constraint == nullptr && options.allowed_token_mask.empty()) return nullptr;
  const size_t words = static_cast<size_t>((vocab + 63) / 64);
  const absl::Span<uint64_t> mask = absl::MakeSpan(masks_).subspan(k * words, words);
  if (constraint != nullptr) {
    const absl::Time start = absl::Now();
    constraint->FillMask(sequence.choice_index, mask);
    if (observer_ != nullptr) observer_->OnGrammarMask(absl::Now() - start);
  } else {
    std::fill(mask.begin(), mask.end(), ~uint64_t{0});
  }
  const std::vector<uint64_t>& allowed = options.allowed_token_mask;
  for (size_t w = 0; w < words; ++w) {
    if (!allowed.empty()) mask[w] &= w < allowed.size() ? allowed[w] : 0;
  }
  return mask.data();
}

absl::Status SampleAction::Run(StepData& step) {
  const size_t num_rows = step.sampling.size();
  rows_.clear();
  rows_.reserve(num_rows);
  const int64_t vocab = step.full_logits.defined() ? step.full_logits.size(1) : 0;
  masks_.resize(num_rows * static_cast<size_t>((vocab + 63) / 64));
  for (size_t k = 0; k < num_rows; ++k) {
    Sequence& sequence = *step.sampling[k];
    SamplerRow row{&sequence.group.request.sampling, &sequence.rng, sequence.prompt(), sequence.output(),
                   step.suppressed[k]};
    if (step.top_needed[k] > 0) {
      row.top_values = step.top_values.data_ptr<float>() + static_cast<int64_t>(k) * step.top_k;
      row.top_ids = step.top_ids.data_ptr<int64_t>() + static_cast<int64_t>(k) * step.top_k;
    } else {
      row.allowed = FillMask(sequence, k, vocab);
    }
    rows_.push_back(row);
  }
  try {
    at::Tensor logits = step.full_logits.narrow(0, 0, step.num_full_sampling_rows);
    step.sampled = sampler_.Sample(logits, rows_);
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("sampling failed: ", error.what()));
  }
  return absl::OkStatus();
}

}  // namespace llmc::engine
