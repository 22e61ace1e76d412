#include "controller/prefix_aware_policy.h"

namespace llmc::controller {

size_t PrefixAwarePolicy::Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& request) {
  constexpr double kTieTolerance = 1e-9;
  const absl::Span<const uint64_t> hashes = request.prefix_hashes;
  ids_.clear();
  for (const RegisteredWorker* worker : candidates) ids_.push_back(&worker->worker_id);
  index_.Match(hashes, ids_, matched_);
  double best = 0;
  tied_.clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const RegisteredWorker& worker = *candidates[i];
    const double prefix = hashes.empty() ? 0.0 : static_cast<double>(matched_[i]) / hashes.size();
    const double score = weights_.prefix * prefix - weights_.load * worker.RelativeLoad() -
                         weights_.kv * static_cast<double>(worker.load.kv_cache_usage());
    if (tied_.empty() || score > best + kTieTolerance) {
      best = score;
      tied_.assign(1, i);
    } else if (score >= best - kTieTolerance) {
      tied_.push_back(i);
    }
  }
  const size_t chosen =
      tied_.size() == 1 ? tied_[0] : tied_[std::uniform_int_distribution<size_t>(0, tied_.size() - 1)(random_)];
  index_.Record(hashes, candidates[chosen]->worker_id);
  return chosen;
}

}  // namespace llmc::controller
