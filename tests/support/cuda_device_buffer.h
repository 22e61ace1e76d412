#ifndef LLMC_TESTS_SUPPORT_CUDA_DEVICE_BUFFER_H_
#define LLMC_TESTS_SUPPORT_CUDA_DEVICE_BUFFER_H_

// For the [gpu] kernel tests that need only the CUDA runtime: a host vector's copy on the device.
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "tests/support/catch.h"

namespace llmc::testing {

template <typename T>
struct DeviceBuffer {
  // byte_offset moves the data off the allocation's (256-byte) boundary.
  explicit DeviceBuffer(const std::vector<T>& host, size_t byte_offset = 0) {
    REQUIRE(cudaMalloc(&base, host.size() * sizeof(T) + byte_offset + 16) == cudaSuccess);
    data = reinterpret_cast<T*>(static_cast<char*>(base) + byte_offset);
    REQUIRE(cudaMemcpy(data, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(base); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::vector<T> ToHost(size_t count) const {
    std::vector<T> host(count);
    REQUIRE(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

  void* base = nullptr;
  T* data = nullptr;
};

inline bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CUDA_DEVICE_BUFFER_H_
