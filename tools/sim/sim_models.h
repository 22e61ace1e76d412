#ifndef LLMC_TOOLS_SIM_SIM_MODELS_H_
#define LLMC_TOOLS_SIM_SIM_MODELS_H_

#include <cstdint>

#include "common/engine_limits.h"

namespace llmc::sim {

// How long one engine step takes: a fixed part, one decode token per decoding sequence and the prefill
// tokens of the step. The defaults are the engine's figures for the Qwen2-0.5B-shaped model in bfloat16 on
// 2 AMD EPYC cores (docs/performance.md), divided by `speedup` to stand for a faster (GPU-class) worker.
struct StepModel {
  double base_ms = 40.0;
  double per_decode_token_ms = 5.8;
  double per_prefill_token_ms = 2.4;
  double speedup = 250.0;

  double StepSeconds(int64_t decode_tokens, int64_t prefill_tokens) const {
    return (base_ms + per_decode_token_ms * decode_tokens + per_prefill_token_ms * prefill_tokens) / speedup / 1000.0;
  }
};

// A worker's engine limits, as llmc-worker's flags set them.
struct WorkerLimits {
  int64_t max_running = kDefaultEngineLimits.max_running;
  int64_t max_num_batched_tokens = kDefaultEngineLimits.max_num_batched_tokens;
  int64_t kv_blocks = 8192;
  int64_t block_size = kDefaultEngineLimits.block_size;
};

// Chat traffic: conversations arrive as a Poisson process; each starts with one of `families` system
// prompts (Zipf-distributed popularity) and has `turns` turns, each a user message and an answer, the
// next turn sent `think_s` (exponential mean) after the answer with the whole conversation so far.
struct Workload {
  int64_t families = 200;
  double zipf_s = 1.0;
  int64_t system_tokens = 512;
  int64_t turns = 4;
  int64_t user_tokens = 64;
  int64_t output_tokens = 64;
  double think_s = 0.5;
};

}  // namespace llmc::sim

#endif  // LLMC_TOOLS_SIM_SIM_MODELS_H_
