#ifndef LLMC_WORKER_ENGINE_PROMPT_LOGPROB_ACTION_H_
#define LLMC_WORKER_ENGINE_PROMPT_LOGPROB_ACTION_H_

#include "worker/engine/output_processor.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// Turns the step's prompt logprob rows (after the sampling rows in full_logits) into each collecting
// sequence's prompt_logprobs: per prompt position, the token's logprob under the model's raw distribution,
// its rank, and the request's number of most likely alternatives. A chunk that starts the prompt (again,
// after a preemption) starts the list over. The emit action sends the list with choice 0's first token.
// Engine thread only.
class PromptLogprobAction {
 public:
  explicit PromptLogprobAction(const OutputProcessor& output) : output_(output) {}

  void Run(StepData& step);

 private:
  const OutputProcessor& output_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_PROMPT_LOGPROB_ACTION_H_
