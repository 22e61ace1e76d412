#ifndef LLMC_WORKER_SERVICE_TYPED_OUTPUT_STATE_H_
#define LLMC_WORKER_SERVICE_TYPED_OUTPUT_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "llmc/v1/worker.pb.h"
#include "worker/service/typed_output_plan.h"
#include "worker/typed_output/output_parser.h"

namespace llmc::worker {

// One chat request's output parsers, one per choice: fills each delta's `typed` from its text, flushes a
// choice's parser on its last delta, and reports a choice that stopped after making calls as TOOL_CALLS.
// Used by one thread at a time (the engine's delivery of this request).
class TypedOutputState {
 public:
  TypedOutputState(const TypedOutputPlan& plan, uint64_t id_seed);

  void Apply(v1::GenerateResponse& response);

 private:
  typed_output::ChoiceOutputParser& ParserFor(uint32_t choice_index);

  const TypedOutputPlan plan_;
  const uint64_t id_seed_;
  std::vector<std::unique_ptr<typed_output::ChoiceOutputParser>> parsers_;  // by choice index
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_TYPED_OUTPUT_STATE_H_
