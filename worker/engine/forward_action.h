#ifndef LLMC_WORKER_ENGINE_FORWARD_ACTION_H_
#define LLMC_WORKER_ENGINE_FORWARD_ACTION_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "worker/engine/batch_builder.h"
#include "worker/engine/engine_observer.h"
#include "worker/engine/output_processor.h"
#include "worker/engine/row_masks.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/step_data.h"
#include "worker/model/loaded_model.h"

namespace llmc::engine {

// Runs the model on the step's batch and brings what sampling reads to the host. Rows whose sampling reads
// only their largest logits skip the full float32 row: the LM head keeps their top logits as it streams
// (greedy needs one), of the allowed tokens only for a row with an allowed-token mask (filled here, first). Any
// failure, an exception included (asynchronous device errors surface in the copies to the host), is an INTERNAL status;
// the K/V of the plan count as computed only after a success. Engine thread only.
class ForwardAction {
 public:
  ForwardAction(model::LoadedModel& model, at::Tensor& kv_cache, const OutputProcessor& output, Scheduler& scheduler,
                const SchedulerLimits& limits, int64_t max_running, EngineObserver* observer = nullptr)
      : model_(model),
        kv_cache_(kv_cache),
        output_(output),
        scheduler_(scheduler),
        batch_builder_(limits.block_size, limits.max_num_batched_tokens, max_running),
        row_masks_(observer) {}

  absl::Status Run(StepData& step);

 private:
  // The sampling rows of the plan and what each needs from the model.
  void PlanRows(StepData& step);
  absl::Status RunModel(const model::ForwardBatch& batch, StepData& step);
  // Copy-on-write: each (from, to) block's K/V into the other before the step writes to it.
  void CopyBlocks(const std::vector<std::pair<int32_t, int32_t>>& copies);

  model::LoadedModel& model_;
  at::Tensor& kv_cache_;
  const OutputProcessor& output_;
  Scheduler& scheduler_;
  BatchBuilder batch_builder_;
  RowMasks row_masks_;
  std::vector<int64_t> full_rows_;  // sampling rows that need the full logits row
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_FORWARD_ACTION_H_
