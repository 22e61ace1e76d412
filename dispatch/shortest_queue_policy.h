#ifndef LLMC_DISPATCH_SHORTEST_QUEUE_POLICY_H_
#define LLMC_DISPATCH_SHORTEST_QUEUE_POLICY_H_

#include <random>

#include "dispatch/dispatch_policy.h"

namespace llmc::dispatch {

// Picks the worker with the lowest (waiting + running + picks since its last heartbeat) ÷ capacity,
// breaking ties at random. Because picks count at once, a burst that arrives between heartbeats
// spreads over equal workers instead of piling onto the one that looked idle.
class ShortestQueuePolicy final : public DispatchPolicy {
 public:
  explicit ShortestQueuePolicy(uint64_t seed) : random_(seed) {}
  absl::string_view name() const override { return "shortest_queue"; }
  size_t Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& request) override;

 private:
  std::mt19937_64 random_;
};

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_SHORTEST_QUEUE_POLICY_H_
