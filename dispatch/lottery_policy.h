#ifndef LLMC_DISPATCH_LOTTERY_POLICY_H_
#define LLMC_DISPATCH_LOTTERY_POLICY_H_

#include <random>

#include "dispatch/dispatch_policy.h"

namespace llmc::dispatch {

// Picks at random, each worker weighted by capacity × speed weight, so a worker twice as large or twice
// as fast gets twice the traffic on average. Ignores current load.
class LotteryPolicy final : public DispatchPolicy {
 public:
  explicit LotteryPolicy(uint64_t seed) : random_(seed) {}
  absl::string_view name() const override { return "lottery"; }
  size_t Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& request) override;

 private:
  std::mt19937_64 random_;
};

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_LOTTERY_POLICY_H_
