#ifndef LLMC_TESTS_BENCH_STREAM_READER_H_
#define LLMC_TESTS_BENCH_STREAM_READER_H_

#include <cstdint>

namespace llmc::bench {

// GB/s of one pass over the first `bytes` of `data` (rounded down to a multiple of 256) on `threads` threads,
// each over its own contiguous share, reading the way the kernels read their weight panels: in order, every
// 64-byte line prefetched 4 KiB ahead. The benches' yardstick for a weight stream: what the machine reads when
// nothing but reading is done.
double PrefetchingReadGbPerSecond(const char* data, int64_t bytes, int threads);

}  // namespace llmc::bench

#endif  // LLMC_TESTS_BENCH_STREAM_READER_H_
