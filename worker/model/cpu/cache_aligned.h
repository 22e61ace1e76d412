#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace llmc::model::cpu {

// Buffers the kernels read with 64-byte vector loads and AMX tile loads start on a cache line: from malloc's
// 16-byte alignment every 64-byte row of a tile or vector would straddle two lines, and a dequantized panel's
// prefill ran about a quarter slower on AMX whenever its buffer happened to start off a line.
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

}  // namespace llmc::model::cpu
