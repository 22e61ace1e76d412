#ifndef LLMC_TOOLS_BENCH_ARRIVALS_H_
#define LLMC_TOOLS_BENCH_ARRIVALS_H_

#include <cstdint>
#include <vector>

namespace llmc::bench {

// When each request is due, in seconds from the start of the run, as vLLM's benchmark schedules them: the
// first at 0, then gaps drawn from a gamma distribution with shape `burstiness` and mean 1/`rate` (shape 1
// is exponential: a Poisson process; smaller shapes are burstier, larger more regular). An infinite (or
// non-positive) `rate` makes every request due at 0. Deterministic for a given seed.
std::vector<double> ArrivalTimes(int64_t count, double rate, double burstiness, uint64_t seed);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_ARRIVALS_H_
