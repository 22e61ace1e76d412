#ifndef LLMC_WORKER_ENGINE_BATCH_BUILDER_H_
#define LLMC_WORKER_ENGINE_BATCH_BUILDER_H_

#include <cstdint>
#include <vector>

#include "worker/engine/scheduler.h"
#include "worker/model/loaded_model.h"

namespace llmc::engine {

// Lays out one step's chunks as the model's flattened batch (docs/model-package.md). The index buffers are
// reused from step to step; the returned tensors view them and stay valid until the next Build. An embedding
// chunk adds hidden rows instead of a logits row: its last row when it pools the last token and ends the
// prompt, every row when it pools the mean. Rows whose logits give prompt logprobs follow the sampling rows.
class BatchBuilder {
 public:
  BatchBuilder(int64_t block_size, int64_t max_num_batched_tokens, int64_t max_running);

  model::ForwardBatch Build(const std::vector<ScheduledChunk>& chunks);

 private:
  const int64_t block_size_;
  std::vector<int64_t> input_ids_, positions_, slot_mapping_, logits_indices_, hidden_rows_;
  std::vector<int32_t> seq_lens_, query_start_locs_, block_tables_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_BATCH_BUILDER_H_
