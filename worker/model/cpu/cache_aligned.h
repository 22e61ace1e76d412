#ifndef LLMC_WORKER_MODEL_CPU_CACHE_ALIGNED_H_
#define LLMC_WORKER_MODEL_CPU_CACHE_ALIGNED_H_

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace llmc::model::cpu {

// Buffers the kernels read with 64-byte vector loads and AMX tile loads start on a cache line: from malloc's
// 16-byte alignment every 64-byte row of a tile or vector would straddle two lines, and a prefill of dequantized
// int4 panels ran about a third slower on AMX whenever its buffer happened to start off a line.
inline constexpr std::size_t kCacheLineBytes = 64;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator does
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLineBytes)));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(kCacheLineBytes)); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const {
    return false;
  }
};

template <typename T>
using CacheAlignedVector = std::vector<T, CacheLineAllocator<T>>;

struct CacheAlignedBytesDelete {
  void operator()(char* bytes) const { ::operator delete[](bytes, std::align_val_t(kCacheLineBytes)); }
};
using CacheAlignedBytes = std::unique_ptr<char[], CacheAlignedBytesDelete>;

// `count` bytes on a cache line, left uninitialized (untouched until written, so their pages are placed where
// they are first written).
inline CacheAlignedBytes NewCacheAlignedBytes(std::size_t count) {
  return CacheAlignedBytes(new (std::align_val_t(kCacheLineBytes)) char[count]);
}

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_CACHE_ALIGNED_H_
