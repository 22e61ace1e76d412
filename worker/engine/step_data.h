#ifndef LLMC_WORKER_ENGINE_STEP_DATA_H_
#define LLMC_WORKER_ENGINE_STEP_DATA_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "worker/engine/sampler.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/sequence.h"

namespace llmc::engine {

// What one step's actions hand each other, in order: schedule → forward → sample → prompt logprobs → pool →
// emit.
struct StepData {
  absl::Time start;
  SchedulerOutput plan;             // schedule
  std::vector<uint64_t> group_ids;  // schedule: the requests in the plan, each once

  // forward: the plan's sampling rows, what each needs, and the logits on the host.
  std::vector<Sequence*> sampling;
  std::vector<std::vector<int32_t>> suppressed;  // per row: ids it must not draw (sized up, reused)
  // per row: its allowed-token mask (row_masks.h), or null; the masks live in mask_words
  std::vector<const uint64_t*> row_masks;
  std::vector<uint64_t> mask_words;
  std::vector<int64_t> top_needed;  // per row: largest logits its sampling reads; 0: a full row
  int64_t top_k = 0;
  at::Tensor full_logits, top_values, top_ids;  // full_logits: the sampling rows', then the prompt logprob rows'
  int64_t num_full_sampling_rows = 0;
  absl::Duration model_time;

  std::vector<SampledToken> sampled;  // sample: one per row

  // forward: the chunks whose positions give prompt logprobs, in the order of their rows in full_logits.
  struct PromptLogprobChunk {
    Sequence* sequence;
    int64_t first_position;  // of the chunk; its row r predicts prompt token first_position + r + 1
    int64_t num_rows;
  };
  std::vector<PromptLogprobChunk> prompt_logprobs;

  // forward: the embedding chunks of the plan, in batch order, and their rows' final hidden states.
  struct PoolingChunk {
    Sequence* sequence;
    int64_t num_rows;  // rows of `hidden` it owns (the chunk's tokens for mean pooling; the last for last)
    bool first;        // the chunk starts the prompt (again, after a preemption): pooling starts over
    bool last;         // the chunk ends the prompt: the embedding is complete
  };
  std::vector<PoolingChunk> pooling;
  at::Tensor hidden;  // [sum of num_rows, hidden_size] float32, on the host

  // Ready for the next step; `suppressed` and `mask_words` keep their buffers.
  void Reset();
};

inline void StepData::Reset() {
  plan = SchedulerOutput();
  group_ids.clear();
  sampling.clear();
  row_masks.clear();
  top_needed.clear();
  top_k = 0;
  num_full_sampling_rows = 0;
  prompt_logprobs.clear();
  full_logits = top_values = top_ids = at::Tensor();
  model_time = absl::ZeroDuration();
  sampled.clear();
  pooling.clear();
  hidden = at::Tensor();
}

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_STEP_DATA_H_
