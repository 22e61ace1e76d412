#ifndef LLMC_WORKER_ENGINE_ENGINE_OBSERVER_H_
#define LLMC_WORKER_ENGINE_ENGINE_OBSERVER_H_

#include <cstdint>

#include "absl/time/time.h"
#include "llmc/v1/types.pb.h"

namespace llmc::engine {

// One engine step as the engine timed it.
struct StepStats {
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  absl::Duration step_time;   // the whole step: schedule, batch, model, sampling, output, queueing deliveries
  absl::Duration model_time;  // of which the model's forward and the copy of its results to the host
};

// What the engine reports for metrics. Called on the engine thread; implementations must be cheap and
// thread-safe with respect to their readers.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnStep(const StepStats& step) {}
  virtual void OnFirstToken(absl::Duration time_to_first_token) {}
  virtual void OnInterToken(absl::Duration inter_token_latency) {}
  virtual void OnPreemption() {}
  // A structured-output row's allowed-token mask took this long to fill.
  virtual void OnGrammarMask(absl::Duration fill_time) {}
  // A step's admissions with prefix caching on: tokens looked up, and those found cached.
  virtual void OnPrefixCacheLookup(int64_t queried_tokens, int64_t hit_tokens) {}
  // One per request, when it ends for any reason.
  virtual void OnRequestFinished(int64_t prompt_tokens, int64_t generation_tokens, v1::FinishReason reason,
                                 absl::Duration end_to_end) {}
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_ENGINE_OBSERVER_H_
