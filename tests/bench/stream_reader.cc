#include "tests/bench/stream_reader.h"

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace llmc::bench {

double PrefetchingReadGbPerSecond(const char* data, int64_t bytes, int threads) {
  bytes = bytes / 256 * 256;
  typedef uint64_t Words __attribute__((vector_size(64)));
  std::vector<uint64_t> sinks(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      const int64_t blocks = bytes / 256, first = blocks * t / threads, last = blocks * (t + 1) / threads;
      Words sum[4] = {};
      for (int64_t block = first; block < last; ++block) {
        const char* position = data + block * 256;
        for (int line = 0; line < 4; ++line) __builtin_prefetch(position + 4096 + 64 * line);
        for (int line = 0; line < 4; ++line) {
          Words words;
          std::memcpy(&words, position + 64 * line, sizeof(words));
          sum[line] += words;
        }
      }
      const Words total = sum[0] + sum[1] + sum[2] + sum[3];
      for (int i = 0; i < 8; ++i) sinks[t] += total[i];
    });
  }
  for (auto& thread : team) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile uint64_t keep = std::accumulate(sinks.begin(), sinks.end(), uint64_t{0});
  (void)keep;
  return static_cast<double>(bytes) / seconds / 1e9;
}

}  // namespace llmc::bench
