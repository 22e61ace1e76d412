#include "worker/engine/sample_action.h"

#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace llmc::engine {

absl::Status SampleAction::Run(StepData& step) {
  const size_t num_rows = step.sampling.size();
  rows_.clear();
  rows_.reserve(num_rows);
  for (size_t k = 0; k < num_rows; ++k) {
    Sequence& sequence = *step.sampling[k];
    SamplerRow row{&sequence.group.request.sampling, &sequence.rng, sequence.prompt(), sequence.output(),
                   step.suppressed[k]};
    row.allowed = step.row_masks[k];
    if (step.top_needed[k] > 0) {
      row.top_values = step.top_values.data_ptr<float>() + static_cast<int64_t>(k) * step.top_k;
      row.top_ids = step.top_ids.data_ptr<int64_t>() + static_cast<int64_t>(k) * step.top_k;
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
