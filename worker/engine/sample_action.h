#ifndef LLMC_WORKER_ENGINE_SAMPLE_ACTION_H_
#define LLMC_WORKER_ENGINE_SAMPLE_ACTION_H_

#include <vector>

#include "absl/status/status.h"
#include "worker/engine/engine_observer.h"
#include "worker/engine/sampler.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// Draws one token per sampling row from the logits the forward action brought to the host, each row with
// its own options and generator; a structured-output row draws only what its grammar allows next (and
// allowed_token_ids only those ids). An exception (only on inputs validation should have refused) is an
// INTERNAL status. Engine thread only.
class SampleAction {
 public:
  explicit SampleAction(EngineObserver* observer = nullptr) : observer_(observer) {}

  absl::Status Run(StepData& step);

 private:
  // Row k's allowed-token mask into masks_, or null when nothing restricts it.
  const uint64_t* FillMask(const Sequence& sequence, size_t k, int64_t vocab);

  EngineObserver* const observer_;
  Sampler sampler_;
  std::vector<SamplerRow> rows_;
  std::vector<uint64_t> masks_;  // row k's words at k * words
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SAMPLE_ACTION_H_
