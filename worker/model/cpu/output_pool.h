#ifndef LLMC_WORKER_MODEL_CPU_OUTPUT_POOL_H_
#define LLMC_WORKER_MODEL_CPU_OUTPUT_POOL_H_

// The outputs of the decode step's operators, recycled. Between two operators the calling thread runs with its
// caches emptied by the weights that just streamed through them, and a fresh at::empty there walks the dispatcher,
// the allocator's lists and a new tensor's objects from memory: 8 µs of a 12 ms int4 step before each down
// projection (Intel Xeon, docs/performance.md). An operator instead takes back a tensor it returned earlier, once
// nothing else holds it or a view of its storage.
#include <ATen/ATen.h>

namespace llmc::model::cpu {

// One pool per operator output, each kept by the thread that runs the operators.
enum OutputSlot {
  kQueryOutput = 0,  // rms_norm_qkv_rope
  kAttentionOutput,  // paged_attention
  kResidualOutput,   // linear_residual
  kGatedOutput,      // rms_norm_gate_up_*
  kOutputSlots
};

// An uninitialised contiguous CPU tensor of `sizes` and `dtype`: a recycled one for outputs up to a decode batch's
// size under InferenceMode (the engine's steps), else at::empty.
at::Tensor RecycledEmpty(OutputSlot slot, at::IntArrayRef sizes, at::ScalarType dtype);

// On by default; off for benchmarks that compare steps with and without it in the same run (process-wide).
void SetOutputRecyclingEnabled(bool enabled);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_OUTPUT_POOL_H_
