#include "worker/engine/device_memory.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

#if defined(LLMC_WITH_CUDA)
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace llmc::engine {
namespace {

absl::StatusOr<int64_t> AvailableHostMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kilobytes = 0;
  while (meminfo >> key >> kilobytes >> unit) {
    if (key == "MemAvailable:") return kilobytes * 1024;
  }
  return absl::UnavailableError("cannot read MemAvailable from /proc/meminfo; set kv_cache_bytes");
}

}  // namespace

absl::StatusOr<int64_t> AvailableDeviceMemory(const at::Device& device) {
  if (device.is_cpu()) return AvailableHostMemory();
#if defined(LLMC_WITH_CUDA)
  if (device.is_cuda()) {
    c10::cuda::CUDAGuard guard(device);
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      return absl::UnavailableError(absl::StrCat("cudaMemGetInfo failed on ", device.str()));
    }
    return static_cast<int64_t>(free_bytes);
  }
#endif
  return absl::InvalidArgumentError(absl::StrCat("no memory query for device ", device.str(), "; set kv_cache_bytes"));
}

}  // namespace llmc::engine
