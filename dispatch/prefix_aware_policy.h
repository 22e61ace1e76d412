#ifndef LLMC_DISPATCH_PREFIX_AWARE_POLICY_H_
#define LLMC_DISPATCH_PREFIX_AWARE_POLICY_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/prefix_index.h"

namespace llmc::dispatch {

// Sends a request where its first token likely comes soonest, counting the prefill its prefix cache saves.
// Each candidate scores, in estimated prompt tokens:
//   prefix × (leading prefix chunks it likely holds × tokens_per_hash)
//   − load × (its prefill backlog + relative load × queue_tokens)
//   − kv × KV cache use × queue_tokens
// and the best wins (ties at random). The backlog starts from the pending prefill tokens of its last
// heartbeat, grows by the uncached tokens of each pick for it, and drains at the prefill rate it reports.
// A request no worker has seen goes by the load terms alone. Every pick is recorded in a bounded
// PrefixIndex; a worker that leaves or restarts is forgotten.
class PrefixAwarePolicy final : public DispatchPolicy {
 public:
  PrefixAwarePolicy(uint64_t seed, const PrefixAwareWeights& weights)
      : random_(seed), weights_(weights), index_(weights.index_capacity) {}
  absl::string_view name() const override { return "prefix_aware"; }
  size_t Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& request) override;
  void Record(const RegisteredWorker& worker, const PickRequest& request) override;
  void Forget(absl::string_view worker_id) override;

 private:
  // The prompt tokens a worker likely still had to prefill at `at`, estimated from its heartbeat number
  // `heartbeat` and the picks since.
  struct BacklogEstimate {
    uint64_t heartbeat = 0;
    double tokens = 0;
    absl::Time at;
  };
  // `worker`'s backlog at `now` (or at the latest time it was estimated, if that is later).
  BacklogEstimate Backlog(const RegisteredWorker& worker, absl::Time now) const;
  // Adds the chunks of `hashes` beyond the `matched` it holds to `worker`'s backlog, and records the pick.
  void Place(const RegisteredWorker& worker, absl::Span<const uint64_t> hashes, int64_t matched, absl::Time now);

  std::mt19937_64 random_;
  const PrefixAwareWeights weights_;
  PrefixIndex index_;
  absl::flat_hash_map<std::string, BacklogEstimate> backlogs_;
  std::vector<const std::string*> ids_;
  std::vector<int64_t> matched_;
  std::vector<size_t> tied_;
};

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_PREFIX_AWARE_POLICY_H_
