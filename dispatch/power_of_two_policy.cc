#include "dispatch/power_of_two_policy.h"

namespace llmc::dispatch {

size_t PowerOfTwoPolicy::Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& /*request*/) {
  if (candidates.size() == 1) return 0;
  std::uniform_int_distribution<size_t> draw(0, candidates.size() - 1);
  const size_t first = draw(random_);
  size_t second = draw(random_);
  // Two distinct candidates: a second draw equal to the first moves to the next one.
  if (second == first) second = (first + 1) % candidates.size();
  return candidates[second]->RelativeLoad() < candidates[first]->RelativeLoad() ? second : first;
}

}  // namespace llmc::dispatch
