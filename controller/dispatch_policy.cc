#include "controller/dispatch_policy.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "controller/lottery_policy.h"
#include "controller/power_of_two_policy.h"
#include "controller/prefix_aware_policy.h"
#include "controller/shortest_queue_policy.h"

namespace llmc::controller {

absl::StatusOr<std::unique_ptr<DispatchPolicy>> MakeDispatchPolicy(absl::string_view name, uint64_t seed,
                                                                   const PrefixAwareWeights& weights) {
  if (seed == 0) seed = (static_cast<uint64_t>(std::random_device()()) << 32) | std::random_device()();
  if (name == "lottery") return std::make_unique<LotteryPolicy>(seed);
  if (name == "shortest_queue") return std::make_unique<ShortestQueuePolicy>(seed);
  if (name == "prefix_aware") return std::make_unique<PrefixAwarePolicy>(seed, weights);
  if (name == "power_of_two") return std::make_unique<PowerOfTwoPolicy>(seed);
  return absl::InvalidArgumentError(absl::StrCat("unknown dispatch policy '", name,
                                                 "' (expected shortest_queue, lottery, power_of_two or prefix_aware)"));
}

}  // namespace llmc::controller
