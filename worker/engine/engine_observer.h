#ifndef LLMC_WORKER_ENGINE_ENGINE_OBSERVER_H_
#define LLMC_WORKER_ENGINE_ENGINE_OBSERVER_H_

#include <cstdint>

#include "absl/time/time.h"
#include "llmc/v1/types.pb.h"

namespace llmc::engine {

// What the engine reports for metrics. Called on the engine thread; implementations must be cheap and
// thread-safe with respect to their readers.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnStep(int64_t num_prefill_tokens, int64_t num_decode_tokens, absl::Duration step_time) {}
  virtual void OnFirstToken(absl::Duration time_to_first_token) {}
  virtual void OnInterToken(absl::Duration inter_token_latency) {}
  virtual void OnPreemption() {}
  // One per request, when it ends for any reason.
  virtual void OnRequestFinished(int64_t prompt_tokens, int64_t generation_tokens, v1::FinishReason reason,
                                 absl::Duration end_to_end) {}
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_ENGINE_OBSERVER_H_
