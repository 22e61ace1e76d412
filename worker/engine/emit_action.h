#ifndef LLMC_WORKER_ENGINE_EMIT_ACTION_H_
#define LLMC_WORKER_ENGINE_EMIT_ACTION_H_

#include <vector>

#include "worker/engine/engine_observer.h"
#include "worker/engine/output_processor.h"
#include "worker/engine/request_table.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// The step's last action: appends each sampled token to its choice (output_processor.h), ends the choices
// that met a stop condition, times first and inter-token latencies, and queues one response per request
// with this step's deltas (the last one with usage; the one with choice 0's first token with the prompt
// logprobs, when asked for). Engine thread only.
class EmitAction {
 public:
  EmitAction(const OutputProcessor& output, RequestTable& table, EngineObserver* observer)
      : output_(output), table_(table), observer_(observer) {}

  void Run(StepData& step);

 private:
  void AddPromptLogprobs(Sequence& sequence, v1::GenerateResponse& response) const;

  struct PendingResponse {
    RequestGroup* group = nullptr;
    v1::GenerateResponse response = {};
    v1::FinishReason last_finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  };

  const OutputProcessor& output_;
  RequestTable& table_;
  EngineObserver* const observer_;
  std::vector<PendingResponse> pending_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_EMIT_ACTION_H_
