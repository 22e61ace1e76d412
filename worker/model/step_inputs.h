#ifndef LLMC_WORKER_MODEL_STEP_INPUTS_H_
#define LLMC_WORKER_MODEL_STEP_INPUTS_H_

#include <ATen/ATen.h>

#include <vector>

namespace llmc::model {

// A step's small host tensors (token ids, positions, slot mapping, block tables, ... of int64 and int32) on
// `device` with one transfer: their bytes packed at 8-byte-aligned offsets into one host buffer (page-locked with
// `pinned`, so that the copy is asynchronous: PyTorch's caching host allocator keeps the block until the copy has
// run), copied once, and viewed on the device as the tensors they were (same dtypes and shapes). Each part must be
// contiguous. A CUDA step otherwise paid one synchronous copy from pageable memory per tensor.
std::vector<at::Tensor> ToDeviceInOneCopy(const std::vector<at::Tensor>& parts, at::Device device, bool pinned);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_STEP_INPUTS_H_
