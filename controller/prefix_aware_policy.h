#ifndef LLMC_CONTROLLER_PREFIX_AWARE_POLICY_H_
#define LLMC_CONTROLLER_PREFIX_AWARE_POLICY_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "controller/dispatch_policy.h"
#include "controller/prefix_index.h"

namespace llmc::controller {

// Sends a request where its prefix was sent before, as long as that worker is not much busier: each
// candidate scores prefix × (leading prefix chunks last sent to it ÷ the request's chunks) − load ×
// relative load (waiting + running + picks since its heartbeat, over capacity) − kv × KV cache use, and
// the best wins (ties at random). A request with no prefix chunks, or one no worker has seen, goes by the
// load terms alone: shortest queue. Every pick is recorded in a bounded PrefixIndex; a worker that leaves
// or restarts is forgotten.
class PrefixAwarePolicy final : public DispatchPolicy {
 public:
  PrefixAwarePolicy(uint64_t seed, const PrefixAwareWeights& weights)
      : random_(seed), weights_(weights), index_(weights.index_capacity) {}
  absl::string_view name() const override { return "prefix_aware"; }
  size_t Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& request) override;
  void Forget(absl::string_view worker_id) override { index_.Forget(worker_id); }

 private:
  std::mt19937_64 random_;
  const PrefixAwareWeights weights_;
  PrefixIndex index_;
  std::vector<const std::string*> ids_;
  std::vector<int64_t> matched_;
  std::vector<size_t> tied_;
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_PREFIX_AWARE_POLICY_H_
