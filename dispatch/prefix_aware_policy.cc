#include "dispatch/prefix_aware_policy.h"

#include <algorithm>
#include <cmath>

namespace llmc::dispatch {

void PrefixAwarePolicy::Forget(absl::string_view worker_id) {
  index_.Forget(worker_id);
  backlogs_.erase(worker_id);
}

PrefixAwarePolicy::BacklogEstimate PrefixAwarePolicy::Backlog(const RegisteredWorker& worker, absl::Time now) const {
  // From the heartbeat's queue, or from the estimate the picks since that heartbeat left.
  BacklogEstimate estimate{worker.heartbeats, static_cast<double>(worker.load.pending_prefill_tokens()),
                           worker.last_heartbeat};
  if (const auto it = backlogs_.find(worker.worker_id);
      it != backlogs_.end() && it->second.heartbeat == worker.heartbeats) {
    estimate = it->second;
  }
  // Drained up to `now`. The time only moves forward: a pick that waited for the lock behind a later one
  // does not drain the same interval twice, and one without a time (InfinitePast) drains nothing.
  const double rate = worker.load.prefill_tokens_per_second();
  if (now > estimate.at && now != absl::InfiniteFuture()) {
    if (rate > 0 && std::isfinite(rate)) {
      estimate.tokens = std::max(0.0, estimate.tokens - rate * absl::ToDoubleSeconds(now - estimate.at));
    }
    estimate.at = now;
  }
  return estimate;
}

void PrefixAwarePolicy::Place(const RegisteredWorker& worker, absl::Span<const uint64_t> hashes, int64_t matched,
                              absl::Time now) {
  // What the worker will likely prefill: the chunks it does not hold (at least one's worth).
  const double uncached = static_cast<double>(std::max<int64_t>(1, static_cast<int64_t>(hashes.size()) - matched)) *
                          weights_.tokens_per_hash;
  BacklogEstimate estimate = Backlog(worker, now);
  estimate.tokens += uncached;
  backlogs_[worker.worker_id] = estimate;
  index_.Record(hashes, worker.worker_id);
}

void PrefixAwarePolicy::Record(const RegisteredWorker& worker, const PickRequest& request) {
  const std::string* id = &worker.worker_id;
  index_.Match(request.prefix_hashes, absl::MakeConstSpan(&id, 1), matched_);
  Place(worker, request.prefix_hashes, matched_[0], request.now);
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
    const double queued = Backlog(worker, request.now).tokens + worker.RelativeLoad() * weights_.queue_tokens;
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
  Place(*candidates[chosen], hashes, matched_[chosen], request.now);
  return chosen;
}

}  // namespace llmc::dispatch
