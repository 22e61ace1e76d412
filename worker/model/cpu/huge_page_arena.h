#ifndef LLMC_WORKER_MODEL_CPU_HUGE_PAGE_ARENA_H_
#define LLMC_WORKER_MODEL_CPU_HUGE_PAGE_ARENA_H_

#include <ATen/ATen.h>

#include <atomic>
#include <cstddef>
#include <memory>

namespace llmc::model::cpu {

// Memory for the large tensors a decode step streams through (packed weights, the KV cache), advised for
// transparent huge pages. With 4 KiB pages every 4 KiB of a weight read is a TLB miss and the hardware
// prefetchers stop at each page boundary: bfloat16 decode steps ran 6-12 % faster on huge pages on the AMD
// EPYC, and a plain streaming read 23 % faster on the Intel Xeon (docs/performance.md). Where the kernel offers no huge
// pages (THP "never", other systems) the memory is ordinary anonymous memory and everything works the same.
class HugePageArena : public std::enable_shared_from_this<HugePageArena> {
 public:
  // Reserves `bytes`, rounded up to whole huge pages. Throws c10::Error when the memory cannot be mapped.
  static std::shared_ptr<HugePageArena> Create(size_t bytes);
  ~HugePageArena();
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // An uninitialised contiguous tensor carved from the arena (page-aligned); it keeps the arena alive. When
  // the arena has no room left the tensor comes from at::empty instead. Safe to call from several threads.
  at::Tensor Empty(at::IntArrayRef sizes, at::ScalarType dtype);

  // The room a tensor of `bytes` takes (tensors start on 4 KiB boundaries): size an arena by its sum.
  static size_t TensorBytes(size_t bytes);

  size_t capacity() const { return capacity_; }
  // Bytes handed out so far.
  size_t used() const { return used_.load(); }

 private:
  HugePageArena(void* mapping, size_t mapping_bytes, char* base, size_t capacity);

  void* const mapping_;
  const size_t mapping_bytes_;
  char* const base_;
  const size_t capacity_;
  std::atomic<size_t> used_{0};
};

// A tensor in an arena of its own, sized to it (the KV cache, a benchmark's read buffer).
at::Tensor EmptyOnHugePages(at::IntArrayRef sizes, at::ScalarType dtype);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_HUGE_PAGE_ARENA_H_
