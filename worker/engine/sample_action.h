#ifndef LLMC_WORKER_ENGINE_SAMPLE_ACTION_H_
#define LLMC_WORKER_ENGINE_SAMPLE_ACTION_H_

#include <vector>

#include "absl/status/status.h"
#include "worker/engine/sampler.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// Draws one token per sampling row from the logits the forward action brought to the host, each row with
// its own options and generator; a structured-output row draws only what its grammar allows next (and
// allowed_token_ids only those ids), by the mask the forward action filled. An exception (only on inputs
// validation should have refused) is an INTERNAL status. Engine thread only.
class SampleAction {
 public:
  absl::Status Run(StepData& step);

 private:
  Sampler sampler_;
  std::vector<SamplerRow> rows_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SAMPLE_ACTION_H_
