#ifndef LLMC_COMMON_ENGINE_LIMITS_H_
#define LLMC_COMMON_ENGINE_LIMITS_H_

#include <cstdint>

namespace llmc {

// The continuous-batching engine's capacity settings with their defaults, written once: the worker's config
// (common/config/worker_config.h), the engine's options (worker/engine/engine.h), llmc-batch and the cluster
// simulator start from these.
struct EngineLimits {
  int64_t block_size = 16;                   // tokens per KV cache block
  int64_t max_num_batched_tokens = 512;      // token budget of one step (decode tokens + prefill chunks)
  int64_t max_running = 32;                  // sequences in the continuous batch
  int64_t max_waiting = 256;                 // queued requests before new ones are refused
  double kv_cache_memory_fraction = 0.3;     // of free device memory (available RAM on CPU) when no size is given
  int64_t max_consecutive_failed_steps = 3;  // then the engine turns unhealthy
};

inline constexpr EngineLimits kDefaultEngineLimits{};

}  // namespace llmc

#endif  // LLMC_COMMON_ENGINE_LIMITS_H_
