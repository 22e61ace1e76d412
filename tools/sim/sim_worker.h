#ifndef LLMC_TOOLS_SIM_SIM_WORKER_H_
#define LLMC_TOOLS_SIM_SIM_WORKER_H_

#include <cstdint>
#include <deque>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/recent_rate.h"
#include "tools/sim/sim_models.h"

namespace llmc::sim {

// One request as the simulation follows it.
struct SimRequest {
  int64_t conversation = 0;
  int64_t family = 0;  // its system prompt
  int64_t turn = 0;
  std::vector<uint64_t> blocks;  // full-block hashes of the prompt and then the answer, first block first
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double arrival_s = 0;
  double first_token_s = -1;
  double done_s = -1;
  int64_t cached_tokens = 0;
  // In the engine:
  int64_t prefill_left = 0;
  int64_t generated = 0;
  int64_t private_blocks = 0;
};

// A continuous-batching engine in the large: admission in arrival order under max_running and the KV
// blocks, chunked prefill under the token budget, one token per decoding sequence per step, and a prefix
// cache of block hashes evicted least recently used. Step times come from the StepModel.
class SimWorker {
 public:
  SimWorker(const WorkerLimits& limits, const StepModel& model) : limits_(limits), model_(model) {}

  void Enqueue(SimRequest* request) { waiting_.push_back(request); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  // Runs one step from `now`: returns its duration and appends the requests it finished to `finished`.
  double Step(double now, std::vector<SimRequest*>& finished);

  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  double kv_usage() const;
  int64_t pending_prefill_tokens() const;
  // Measured as the engine measures it (WorkerLoad.prefill_tokens_per_second).
  double prefill_tokens_per_second() const { return prefill_rate_.rate(); }

 private:
  void Admit();
  int64_t CachedPrefixBlocks(const SimRequest& request);
  void CacheBlocks(const SimRequest& request);
  void EvictTo(int64_t free_blocks_wanted);

  const WorkerLimits limits_;
  const StepModel model_;
  std::deque<SimRequest*> waiting_;
  std::vector<SimRequest*> running_;
  RecentRate prefill_rate_;
  int64_t private_blocks_ = 0;  // held by running requests beyond the cached ones they share
  std::list<uint64_t> lru_;     // cached block hashes, most recent first
  absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> cached_;
};

}  // namespace llmc::sim

#endif  // LLMC_TOOLS_SIM_SIM_WORKER_H_
