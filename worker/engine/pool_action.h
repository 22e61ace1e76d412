#ifndef LLMC_WORKER_ENGINE_POOL_ACTION_H_
#define LLMC_WORKER_ENGINE_POOL_ACTION_H_

#include "worker/engine/request_table.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// The embedding requests' share of a step: adds each embedding chunk's final hidden rows to its sequence
// (starting over when the chunk starts the prompt, as after a preemption), and for a chunk that ends the
// prompt, L2-normalizes the pooled vector and answers the request with it and its usage. Engine thread only.
class PoolAction {
 public:
  explicit PoolAction(RequestTable& table) : table_(table) {}

  void Run(StepData& step);

 private:
  RequestTable& table_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_POOL_ACTION_H_
