#ifndef LLMC_DISPATCH_POWER_OF_TWO_POLICY_H_
#define LLMC_DISPATCH_POWER_OF_TWO_POLICY_H_

#include <random>

#include "dispatch/dispatch_policy.h"

namespace llmc::dispatch {

// Power of two choices: two candidates drawn at random, the one with the lower relative load wins. Nearly
// as balanced as shortest_queue, but many dispatchers with stale views do not all pile onto the one
// worker that looks idlest.
class PowerOfTwoPolicy final : public DispatchPolicy {
 public:
  explicit PowerOfTwoPolicy(uint64_t seed) : random_(seed) {}
  absl::string_view name() const override { return "power_of_two"; }
  size_t Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& request) override;

 private:
  std::mt19937_64 random_;
};

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_POWER_OF_TWO_POLICY_H_
