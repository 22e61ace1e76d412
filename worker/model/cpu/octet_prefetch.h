#ifndef LLMC_WORKER_MODEL_CPU_OCTET_PREFETCH_H_
#define LLMC_WORKER_MODEL_CPU_OCTET_PREFETCH_H_

#include <cstdint>

namespace llmc::model::cpu {

// __builtin_prefetch localities of the 4-bit kernels' weight prefetches (cpu_isa.h, WeightPrefetch).
constexpr int kPrefetchIntoL1 = 3;  // prefetcht0
constexpr int kPrefetchIntoL2 = 1;  // prefetcht2: L2 and the shared cache, not L1

// Every 64-byte line of the k octet (256 bytes of a 4-bit panel) `distance` bytes ahead: AMD parts have no
// adjacent-line prefetcher to fetch the second line of a pair.
template <int kLocality>
inline void PrefetchOctetAhead(const uint8_t* octet, int64_t distance) {
  const uint8_t* ahead = octet + distance;
  __builtin_prefetch(ahead, 0, kLocality);
  __builtin_prefetch(ahead + 64, 0, kLocality);
  __builtin_prefetch(ahead + 128, 0, kLocality);
  __builtin_prefetch(ahead + 192, 0, kLocality);
}

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_OCTET_PREFETCH_H_
