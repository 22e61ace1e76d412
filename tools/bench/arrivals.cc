#include "tools/bench/arrivals.h"

#include <cmath>
#include <random>

namespace llmc::bench {

std::vector<double> ArrivalTimes(int64_t count, double rate, double burstiness, uint64_t seed) {
  std::vector<double> times(static_cast<size_t>(count > 0 ? count : 0), 0.0);
  if (!std::isfinite(rate) || rate <= 0 || times.empty()) return times;
  // A distinct stream from the dataset's, so changing the rate leaves the prompts alone.
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double now = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    now += gap(rng);
    times[i] = now;
  }
  return times;
}

}  // namespace llmc::bench
