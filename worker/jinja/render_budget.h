#ifndef LLMC_WORKER_JINJA_RENDER_BUDGET_H_
#define LLMC_WORKER_JINJA_RENDER_BUDGET_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace llmc::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;    // the rendered text, and any one string built on the way
  int64_t max_loop_iterations = 1'000'000;       // all loop iterations of one render together
  int max_nesting_depth = 500;                   // statements, expressions and macro calls nested
  int64_t max_steps = 20'000'000;                // expressions evaluated and statements run
  int64_t max_built_bytes = int64_t{256} << 20;  // bytes of strings and list items created in total
};

// What one render may still spend. Every limit breach is RESOURCE_EXHAUSTED naming the limit, so a
// hostile or runaway template ends with an error instead of exhausting time, memory or the stack.
class RenderBudget {
 public:
  explicit RenderBudget(const RenderLimits& limits) : limits_(limits) {}

  const RenderLimits& limits() const { return limits_; }

  absl::Status Step() {
    if (++steps_ > limits_.max_steps)
      return absl::ResourceExhaustedError("template exceeded its evaluation step limit");
    return absl::OkStatus();
  }
  absl::Status Iteration() {
    if (++iterations_ > limits_.max_loop_iterations) {
      return absl::ResourceExhaustedError("template exceeded its loop iteration limit");
    }
    return absl::OkStatus();
  }
  // Charged for each string or list about to be built, before it is built.
  absl::Status Build(size_t bytes) {
    if (bytes > limits_.max_output_bytes) {
      return absl::ResourceExhaustedError("template built a string larger than the output limit");
    }
    built_bytes_ += static_cast<int64_t>(bytes);
    if (built_bytes_ > limits_.max_built_bytes) {
      return absl::ResourceExhaustedError("template exceeded its limit on bytes built");
    }
    return absl::OkStatus();
  }
  absl::Status Enter() {
    if (++depth_ > limits_.max_nesting_depth) {
      return absl::ResourceExhaustedError("template exceeded its nesting depth limit (macro recursion?)");
    }
    return absl::OkStatus();
  }
  void Leave() { --depth_; }

 private:
  RenderLimits limits_;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  int64_t built_bytes_ = 0;
  int depth_ = 0;
};

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_RENDER_BUDGET_H_
