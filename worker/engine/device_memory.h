#ifndef LLMC_WORKER_ENGINE_DEVICE_MEMORY_H_
#define LLMC_WORKER_ENGINE_DEVICE_MEMORY_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace llmc::engine {

// Bytes free for a KV cache on `device`: free GPU memory for CUDA, MemAvailable for the CPU.
absl::StatusOr<int64_t> AvailableDeviceMemory(const at::Device& device);

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_DEVICE_MEMORY_H_
