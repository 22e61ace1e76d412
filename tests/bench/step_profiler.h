#ifndef LLMC_TESTS_BENCH_STEP_PROFILER_H_
#define LLMC_TESTS_BENCH_STEP_PROFILER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace llmc::bench {

// Where one forward step's time goes: every operator the TorchScript interpreter calls from the profiling
// thread is timed (nested operators are counted in their caller), per operator name and per segment of the
// network. Segments follow the graph: "embed" until the first layer, "layer N" from the graph's
// `kv_cache[N]` select on, "head" from the `index_select` of the rows that need logits. What the operators
// do not cover (the interpreter, views it runs inline, the loader's input copies) is the step's wall time
// minus their sum.
class StepProfiler {
 public:
  StepProfiler();
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Timing is on between Begin and End; End adds the step's wall time.
  void Begin();
  void End();

  // Prints the tables (per operator kind, per segment, totals), averaged over the steps measured.
  void Print(const std::string& title) const;

  struct Totals {
    double seconds = 0;
    int64_t calls = 0;
  };

 private:
  uint64_t callback_handle_ = 0;
  std::chrono::steady_clock::time_point step_start_;
  double wall_seconds_ = 0;
  int steps_ = 0;
};

}  // namespace llmc::bench

#endif  // LLMC_TESTS_BENCH_STEP_PROFILER_H_
