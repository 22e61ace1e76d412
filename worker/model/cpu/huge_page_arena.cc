#include "worker/model/cpu/huge_page_arena.h"

#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace llmc::model::cpu {
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kTensorAlignment = 4096;

size_t RoundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

std::shared_ptr<HugePageArena> HugePageArena::Create(size_t bytes) {
  const size_t capacity = RoundUp(std::max<size_t>(bytes, 1), kHugePageBytes);
  // One extra huge page so that the usable range can start on a huge-page boundary: the kernel backs only
  // aligned 2 MiB ranges with huge pages.
  const size_t mapping_bytes = capacity + kHugePageBytes;
  void* mapping = mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(mapping != MAP_FAILED, "cannot map ", mapping_bytes, " bytes for weights: ", std::strerror(errno));
  char* base = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(mapping), kHugePageBytes));
#ifdef MADV_HUGEPAGE
  // Only advice: where the kernel refuses it (THP "never"), the memory is ordinary pages.
  madvise(base, capacity, MADV_HUGEPAGE);
#endif
  return std::shared_ptr<HugePageArena>(new HugePageArena(mapping, mapping_bytes, base, capacity));
}

HugePageArena::HugePageArena(void* mapping, size_t mapping_bytes, char* base, size_t capacity)
    : mapping_(mapping), mapping_bytes_(mapping_bytes), base_(base), capacity_(capacity) {}

HugePageArena::~HugePageArena() { munmap(mapping_, mapping_bytes_); }

size_t HugePageArena::TensorBytes(size_t bytes) { return RoundUp(bytes, kTensorAlignment); }

at::Tensor HugePageArena::Empty(at::IntArrayRef sizes, at::ScalarType dtype) {
  const size_t bytes = TensorBytes(static_cast<size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype));
  size_t offset = used_.load();
  do {
    if (offset + bytes > capacity_) return at::empty(sizes, at::TensorOptions().dtype(dtype));
  } while (!used_.compare_exchange_weak(offset, offset + bytes));
  // The deleter holds the arena: it is unmapped when its last tensor goes.
  return at::from_blob(
      base_ + offset, sizes, [arena = shared_from_this()](void*) {}, at::TensorOptions().dtype(dtype));
}

at::Tensor EmptyOnHugePages(at::IntArrayRef sizes, at::ScalarType dtype) {
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype);
  return HugePageArena::Create(bytes)->Empty(sizes, dtype);
}

}  // namespace llmc::model::cpu
