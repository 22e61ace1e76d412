#ifndef LLMC_WORKER_ENGINE_CONTINUOUS_BATCHING_ENGINE_H_
#define LLMC_WORKER_ENGINE_CONTINUOUS_BATCHING_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/recent_rate.h"
#include "worker/engine/admit_action.h"
#include "worker/engine/beam_search_action.h"
#include "worker/engine/block_allocator.h"
#include "worker/engine/delivery_queue.h"
#include "worker/engine/emit_action.h"
#include "worker/engine/engine.h"
#include "worker/engine/forward_action.h"
#include "worker/engine/output_processor.h"
#include "worker/engine/pool_action.h"
#include "worker/engine/prompt_logprob_action.h"
#include "worker/engine/request_inbox.h"
#include "worker/engine/request_table.h"
#include "worker/engine/sample_action.h"
#include "worker/engine/schedule_action.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// The Engine: one thread (Run) owns the model, the KV cache, the scheduler and every request, and runs
// steps, each an ordered list of actions: admit → schedule → forward → sample → prompt logprobs → pool → beam search
// → emit (one file each; docs/engine.md).
// Other threads reach it only through the inbox (request_inbox.h) and the load and health snapshots
// (`state_mu_`). Sinks are called on the delivery thread (delivery_queue.h), never on the engine thread.
class ContinuousBatchingEngine final : public Engine {
 public:
  ContinuousBatchingEngine(std::unique_ptr<model::LoadedModel> model, const tokenizer::Tokenizer& tokenizer,
                           const EngineOptions& options, int32_t num_blocks, at::Tensor kv_cache,
                           EngineObserver* observer);
  ~ContinuousBatchingEngine() override;

  absl::Status Start() override;
  absl::StatusOr<uint64_t> Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override;
  void Abort(uint64_t id) override { inbox_.Abort(id); }
  void StopAccepting() override { inbox_.Close(); }
  absl::Status Health() const override;
  void SetUnhealthyListener(std::function<void(const absl::Status&)> listener) override;
  int64_t NumUnfinished() const override { return inbox_.num_unfinished(); }
  EngineLoad Load() const override;
  void Stop() override;

  int64_t max_model_len() const override { return options_.max_model_len; }
  const model::ModelManifest& manifest() const override { return model_->manifest(); }
  std::string device() const override { return model_->device().str(); }
  std::string dtype() const override;

 private:
  absl::Status Validate(const GenerationRequest& request) const;
  void Run();
  void Step();
  // The forward pass (`model_failed`) or the sampling failed: every request in the step ends with INTERNAL;
  // after max_consecutive_failed_steps model failures in a row the engine turns unhealthy.
  void FailStep(const absl::Status& status, bool model_failed);
  void PublishLoad(int64_t generated_tokens);
  void Deliver() { delivery_.Push(table_.TakeDeliveries()); }

  std::unique_ptr<model::LoadedModel> model_;
  const EngineOptions options_;
  EngineObserver* const observer_;
  at::Tensor kv_cache_;
  RequestInbox inbox_;

  // Engine thread only.
  BlockAllocator allocator_;
  Scheduler scheduler_;
  OutputProcessor output_;
  RequestTable table_;
  AdmitAction admit_;
  ScheduleAction schedule_;
  ForwardAction forward_;
  SampleAction sample_;
  PromptLogprobAction prompt_logprobs_;
  PoolAction pool_;
  BeamSearchAction beam_search_;
  EmitAction emit_;
  StepData step_;
  int64_t consecutive_failed_steps_ = 0;
  RecentRate prefill_rate_;    // prompt tokens per second of the steps that computed some
  int64_t window_tokens_ = 0;  // generated since window_start_, for tokens_per_second
  absl::Time window_start_ = absl::InfinitePast();
  std::function<void(const absl::Status&)> unhealthy_listener_;  // set before Start

  mutable absl::Mutex state_mu_;
  EngineLoad load_ ABSL_GUARDED_BY(state_mu_);
  absl::Time load_rate_time_ ABSL_GUARDED_BY(state_mu_) = absl::InfinitePast();
  absl::Status health_ ABSL_GUARDED_BY(state_mu_);

  DeliveryQueue delivery_;  // declared before thread_: outlives the engine thread
  std::thread thread_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_CONTINUOUS_BATCHING_ENGINE_H_
