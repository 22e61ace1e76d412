#include "dispatch/dispatch_policy.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "dispatch/lottery_policy.h"
#include "dispatch/power_of_two_policy.h"
#include "dispatch/prefix_aware_policy.h"
#include "dispatch/shortest_queue_policy.h"

namespace llmc::dispatch {

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

absl::StatusOr<std::unique_ptr<DispatchPolicy>> MakeDispatchPolicy(const v1::DispatchSettings& settings,
                                                                   uint64_t seed) {
  PrefixAwareWeights weights;
  if (settings.has_prefix_weight()) weights.prefix = settings.prefix_weight();
  if (settings.has_load_weight()) weights.load = settings.load_weight();
  if (settings.has_kv_weight()) weights.kv = settings.kv_weight();
  if (settings.has_tokens_per_hash()) weights.tokens_per_hash = settings.tokens_per_hash();
  if (settings.has_queue_tokens()) weights.queue_tokens = settings.queue_tokens();
  if (settings.has_prefix_index_entries()) weights.index_capacity = settings.prefix_index_entries();
  return MakeDispatchPolicy(settings.policy(), seed, weights);
}

}  // namespace llmc::dispatch
