#ifndef LLMC_WORKER_MODEL_LINEAR_OPS_H_
#define LLMC_WORKER_MODEL_LINEAR_OPS_H_

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

namespace llmc::model {

// llmc::linear(Tensor input, Tensor weight, Tensor? bias) -> Tensor, the projections of model packages from
// format version 2 on (docs/model-package.md); same semantics as torch.nn.functional.linear. Registration
// happens when this file's object is linked in; calling EnsureLinearOpRegistered() from the loader
// guarantees that.
bool EnsureLinearOpRegistered();

// The CPU kernel. Inputs with few rows (decode steps) in bfloat16 or float32 go through a kernel that
// streams the weight once, when the CPU has the instructions for it; everything else goes to at::linear.
// With allow_fast_path false it always goes to at::linear (tests compare the two).
at::Tensor LinearCpu(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                     bool allow_fast_path = true);

// Whether LinearCpu would take the fast path for these arguments on this CPU.
bool LinearCpuUsesFastPath(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias);

// The most input rows the fast path takes for `dtype` on this CPU; 0 where it has no fast path.
int64_t LinearCpuMaxFastRows(at::ScalarType dtype);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_LINEAR_OPS_H_
