#ifndef LLMC_WORKER_ENGINE_CONTINUOUS_BATCHING_ENGINE_H_
#define LLMC_WORKER_ENGINE_CONTINUOUS_BATCHING_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "worker/engine/batch_builder.h"
#include "worker/engine/block_allocator.h"
#include "worker/engine/delivery_queue.h"
#include "worker/engine/engine.h"
#include "worker/engine/output_processor.h"
#include "worker/engine/sampler.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/sequence.h"

namespace llmc::engine {

// The Engine: one thread (Run) owns the model, the KV cache, the scheduler and every RequestGroup; other
// threads only touch what is guarded by `mu_` (the input queues) or `load_mu_` (the load snapshot). Sinks
// are called on the delivery thread (delivery_queue.h), never on the engine thread.
class ContinuousBatchingEngine final : public Engine {
 public:
  ContinuousBatchingEngine(std::unique_ptr<model::LoadedModel> model, const tokenizer::Tokenizer& tokenizer,
                           const EngineOptions& options, int32_t num_blocks, at::Tensor kv_cache,
                           EngineObserver* observer);
  ~ContinuousBatchingEngine() override;

  absl::Status Start() override;
  absl::StatusOr<uint64_t> Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override;
  void Abort(uint64_t id) override;
  void StopAccepting() override;
  int64_t NumUnfinished() const override { return num_unfinished_.load(); }
  EngineLoad Load() const override;
  void Stop() override;

  int64_t max_model_len() const override { return options_.max_model_len; }
  const model::ModelManifest& manifest() const override { return model_->manifest(); }
  std::string device() const override { return model_->device().str(); }
  std::string dtype() const override;

 private:
  absl::Status Validate(const GenerationRequest& request) const;
  void Run();
  // Moves submitted requests into the scheduler and applies aborts; false once Stop was called.
  bool TakeInputs();
  void Step();
  void ExpireDeadlines();
  // Ends a request that did not complete: frees its sequences and tells the sink why.
  void EndEarly(RequestGroup& group, const absl::Status& status, v1::FinishReason reason);
  void EndGroup(uint64_t id);
  // The model or the sampler failed: every request in the step ends with `status`; the engine goes on.
  void FailStep(const SchedulerOutput& plan, const absl::Status& status);
  void SendPendingResponses(const std::vector<RequestGroup*>& touched);
  // Runs the model for the plan's batch and samples one token per sampling row; false when the step failed
  // (FailStep has ended its requests).
  bool ForwardAndSample(const SchedulerOutput& plan, std::vector<Sequence*>& sampled_sequences,
                        std::vector<SampledToken>& sampled, absl::Duration& model_time);
  void PublishLoad(int64_t generated_tokens);

  std::unique_ptr<model::LoadedModel> model_;
  const tokenizer::Tokenizer& tokenizer_;
  const EngineOptions options_;
  EngineObserver* const observer_;
  at::Tensor kv_cache_;

  // Engine thread only.
  BlockAllocator allocator_;
  Scheduler scheduler_;
  BatchBuilder batch_builder_;
  Sampler sampler_;
  OutputProcessor output_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<RequestGroup>> groups_;
  std::vector<std::vector<int32_t>> suppressed_;  // per sampled row, reused
  std::vector<Delivery> deliveries_;              // of this step, handed to delivery_ at its end
  int64_t num_preemptions_ = 0;
  int64_t window_tokens_ = 0;  // generated since window_start_, for tokens_per_second
  absl::Time window_start_ = absl::InfinitePast();

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<RequestGroup>> incoming_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> aborts_ ABSL_GUARDED_BY(mu_);
  int64_t num_queued_requests_ ABSL_GUARDED_BY(mu_) = 0;  // against max_waiting
  bool accepting_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;

  mutable absl::Mutex load_mu_;
  EngineLoad load_ ABSL_GUARDED_BY(load_mu_);
  absl::Time load_rate_time_ ABSL_GUARDED_BY(load_mu_) = absl::InfinitePast();

  std::atomic<int64_t> num_unfinished_{0};
  DeliveryQueue delivery_;  // declared before thread_: outlives the engine thread
  std::thread thread_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_CONTINUOUS_BATCHING_ENGINE_H_
