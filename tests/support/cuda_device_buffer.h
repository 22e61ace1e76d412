#ifndef LLMC_TESTS_SUPPORT_CUDA_DEVICE_BUFFER_H_
#define LLMC_TESTS_SUPPORT_CUDA_DEVICE_BUFFER_H_

// For the [gpu] kernel tests that need only the CUDA runtime: a host vector's copy on the device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/support/catch.h"
#include "worker/model/cpu/attention_kernel.h"

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

// A kernel's output of `count` values in float32 or bfloat16 (`bf16`), NaN until written, so a value the kernel
// leaves out fails any check.
class DeviceOutput {
 public:
  DeviceOutput(size_t count, bool bf16)
      : count_(count),
        bf16_(bf16),
        floats_(std::vector<float>(bf16 ? 1 : count, NAN)),
        halves_(std::vector<uint16_t>(bf16 ? count : 1, 0x7FC0)) {}

  void* data() const { return bf16_ ? static_cast<void*>(halves_.data) : static_cast<void*>(floats_.data); }

  // The values as floats (bfloat16 widened exactly).
  std::vector<float> ToFloats() const {
    if (!bf16_) return floats_.ToHost(count_);
    const std::vector<uint16_t> bits = halves_.ToHost(count_);
    std::vector<float> values(count_);
    for (size_t i = 0; i < count_; ++i) values[i] = model::cpu::attention_detail::Bf16ToFloat(bits[i]);
    return values;
  }

  // How many values differ, bit for bit, from want(i) (a float) rounded once to the output's dtype.
  template <typename Want>
  size_t CountNotRoundedOnce(Want want) const {
    const std::vector<float> floats = bf16_ ? std::vector<float>() : floats_.ToHost(count_);
    const std::vector<uint16_t> halves = bf16_ ? halves_.ToHost(count_) : std::vector<uint16_t>();
    size_t mismatches = 0;
    for (size_t i = 0; i < count_; ++i) {
      const float expected = want(i);
      const bool same = bf16_ ? halves[i] == model::cpu::attention_detail::FloatToBf16(expected)
                              : std::memcmp(&floats[i], &expected, sizeof(float)) == 0;
      mismatches += same ? 0 : 1;
    }
    return mismatches;
  }

 private:
  size_t count_;
  bool bf16_;
  DeviceBuffer<float> floats_;
  DeviceBuffer<uint16_t> halves_;
};

inline bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CUDA_DEVICE_BUFFER_H_
