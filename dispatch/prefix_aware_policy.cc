#include "dispatch/prefix_aware_policy.h"

#include <algorithm>

namespace llmc::dispatch {

void PrefixAwarePolicy::Forget(absl::string_view worker_id) {
  index_.Forget(worker_id);
  charges_.erase(worker_id);
}

double PrefixAwarePolicy::ChargedSinceHeartbeat(const RegisteredWorker& worker) {
  const auto it = charges_.find(worker.worker_id);
  if (it == charges_.end() || it->second.heartbeat != worker.heartbeats) return 0;
  return it->second.tokens;
}

void PrefixAwarePolicy::Place(const RegisteredWorker& worker, absl::Span<const uint64_t> hashes, int64_t matched) {
  // What the worker will likely prefill: the chunks it does not hold (at least one's worth).
  const double uncached = static_cast<double>(std::max<int64_t>(1, static_cast<int64_t>(hashes.size()) - matched)) *
                          weights_.tokens_per_hash;
  Charge& charge = charges_[worker.worker_id];
  if (charge.heartbeat != worker.heartbeats) charge = Charge{worker.heartbeats, 0};
  charge.tokens += uncached;
  index_.Record(hashes, worker.worker_id);
}

void PrefixAwarePolicy::Record(const RegisteredWorker& worker, const PickRequest& request) {
  const std::string* id = &worker.worker_id;
  index_.Match(request.prefix_hashes, absl::MakeConstSpan(&id, 1), matched_);
  Place(worker, request.prefix_hashes, matched_[0]);
}

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
    const double cached = static_cast<double>(matched_[i]) * weights_.tokens_per_hash;
    const double queued = static_cast<double>(worker.load.pending_prefill_tokens()) + ChargedSinceHeartbeat(worker) +
                          worker.RelativeLoad() * weights_.queue_tokens;
    const double score = weights_.prefix * cached - weights_.load * queued -
                         weights_.kv * static_cast<double>(worker.load.kv_cache_usage()) * weights_.queue_tokens;
    if (tied_.empty() || score > best + kTieTolerance) {
      best = score;
      tied_.assign(1, i);
    } else if (score >= best - kTieTolerance) {
      tied_.push_back(i);
    }
  }
  const size_t chosen =
      tied_.size() == 1 ? tied_[0] : tied_[std::uniform_int_distribution<size_t>(0, tied_.size() - 1)(random_)];
  Place(*candidates[chosen], hashes, matched_[chosen]);
  return chosen;
}

}  // namespace llmc::dispatch
