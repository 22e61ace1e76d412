#include "dispatch/shortest_queue_policy.h"

#include <cmath>
#include <vector>

namespace llmc::dispatch {

size_t ShortestQueuePolicy::Choose(absl::Span<const RegisteredWorker* const> candidates,
                                   const PickRequest& /*request*/) {
  constexpr double kTieTolerance = 1e-9;
  double best = candidates[0]->RelativeLoad();
  std::vector<size_t> tied = {0};
  for (size_t i = 1; i < candidates.size(); ++i) {
    const double load = candidates[i]->RelativeLoad();
    if (load < best - kTieTolerance) {
      best = load;
      tied.assign(1, i);
    } else if (std::abs(load - best) <= kTieTolerance) {
      tied.push_back(i);
    }
  }
  if (tied.size() == 1) return tied[0];
  return tied[std::uniform_int_distribution<size_t>(0, tied.size() - 1)(random_)];
}

}  // namespace llmc::dispatch
