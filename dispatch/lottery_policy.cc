#include "dispatch/lottery_policy.h"

#include <vector>

namespace llmc::dispatch {

size_t LotteryPolicy::Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& /*request*/) {
  std::vector<double> cumulative;
  cumulative.reserve(candidates.size());
  double total = 0;
  for (const RegisteredWorker* worker : candidates) {
    total += worker->Capacity() * worker->speed_weight;
    cumulative.push_back(total);
  }
  const double ticket = std::uniform_real_distribution<double>(0.0, total)(random_);
  for (size_t i = 0; i < cumulative.size(); ++i) {
    if (ticket < cumulative[i]) return i;
  }
  return candidates.size() - 1;  // ticket == total, only by rounding
}

}  // namespace llmc::dispatch
