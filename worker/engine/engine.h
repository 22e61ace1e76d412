#ifndef LLMC_WORKER_ENGINE_ENGINE_H_
#define LLMC_WORKER_ENGINE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine_limits.h"
#include "worker/engine/engine_observer.h"
#include "worker/engine/generation.h"
#include "worker/model/loaded_model.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::engine {

struct EngineOptions {
  int64_t kv_cache_bytes = 0;  // 0: kv_cache_memory_fraction of free device memory (available RAM on CPU)
  double kv_cache_memory_fraction = kDefaultEngineLimits.kv_cache_memory_fraction;
  int64_t block_size = kDefaultEngineLimits.block_size;
  int64_t max_num_batched_tokens = kDefaultEngineLimits.max_num_batched_tokens;
  int64_t max_running = kDefaultEngineLimits.max_running;
  int64_t max_waiting = kDefaultEngineLimits.max_waiting;
  int64_t max_model_len = 0;  // 0: the manifest's max_context_length
  // After this many model steps in a row fail, the engine turns unhealthy (Health) and refuses new requests.
  int64_t max_consecutive_failed_steps = kDefaultEngineLimits.max_consecutive_failed_steps;
  // Full KV blocks stay cached under the hash of their tokens; a request reuses its longest cached prefix.
  bool enable_prefix_caching = true;
};

// A snapshot of the engine's load, for heartbeats, status and metrics.
struct EngineLoad {
  int64_t num_waiting = 0;  // requests queued, not yet running
  int64_t num_running = 0;  // sequences in the continuous batch
  int64_t num_kv_blocks = 0;
  int64_t num_kv_blocks_used = 0;
  int64_t max_running = 0;
  int64_t max_waiting = 0;
  int64_t num_preemptions = 0;           // since start
  int64_t pending_prefill_tokens = 0;    // uncomputed tokens of waiting and prefilling sequences
  int64_t prefix_cache_queries = 0;      // since start: prompt tokens looked up in the prefix cache
  int64_t prefix_cache_hits = 0;         // since start: of which found cached
  double tokens_per_second = 0;          // generated tokens, recent
  double prefill_tokens_per_second = 0;  // prompt tokens computed per second of recent prefill steps
  double kv_cache_usage() const {
    return num_kv_blocks == 0 ? 0.0 : static_cast<double>(num_kv_blocks_used) / num_kv_blocks;
  }
};

// The continuous-batching engine (docs/engine.md). One engine thread owns the model, the KV cache and
// every sequence; Submit and Abort reach it through queues drained between steps.
class Engine {
 public:
  // Allocates the KV cache from the budget. `tokenizer` must outlive the engine; `observer` may be null.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(std::unique_ptr<model::LoadedModel> model,
                                                        const tokenizer::Tokenizer& tokenizer,
                                                        const EngineOptions& options,
                                                        EngineObserver* observer = nullptr);
  virtual ~Engine() = default;

  // Runs a warm-up step, then starts the engine thread.
  virtual absl::Status Start() = 0;
  // Checks and queues a request, or refuses it at once: INVALID_ARGUMENT (empty prompt, ids outside the
  // vocabulary, prompt + max_tokens beyond the context, naming the numbers), RESOURCE_EXHAUSTED (waiting
  // queue full), UNAVAILABLE (draining or stopped). On success the sink gets its output and exactly one
  // OnDone; the returned id is for Abort.
  virtual absl::StatusOr<uint64_t> Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) = 0;
  // Drops the request at the next step and frees its blocks; its sink gets OnDone(CANCELLED). Unknown or
  // finished ids are ignored.
  virtual void Abort(uint64_t id) = 0;
  // Refuses new requests with UNAVAILABLE from now on; in-flight ones continue.
  virtual void StopAccepting() = 0;
  // OK, or INTERNAL once max_consecutive_failed_steps model steps in a row have failed: from then on
  // Submit refuses with UNAVAILABLE (another worker may serve the request) and the worker should leave
  // rotation. It does not come back: the process needs a restart.
  virtual absl::Status Health() const = 0;
  // Called once, on the delivery thread, when Health turns unhealthy. Set before Start.
  virtual void SetUnhealthyListener(std::function<void(const absl::Status&)> listener) = 0;
  // Requests submitted and not yet ended (their last status may still be on its way to the sink).
  virtual int64_t NumUnfinished() const = 0;
  virtual EngineLoad Load() const = 0;
  // Aborts whatever is left (OnDone(UNAVAILABLE)) and joins the engine thread. Idempotent.
  virtual void Stop() = 0;

  // The model's context limit as served (after max_model_len).
  virtual int64_t max_model_len() const = 0;
  virtual const model::ModelManifest& manifest() const = 0;
  virtual std::string device() const = 0;
  virtual std::string dtype() const = 0;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_ENGINE_H_
