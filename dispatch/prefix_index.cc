#include "dispatch/prefix_index.h"

#include <algorithm>

namespace llmc::dispatch {

PrefixIndex::PrefixIndex(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}

int32_t PrefixIndex::Intern(absl::string_view worker_id) {
  auto [it, inserted] = worker_numbers_.try_emplace(worker_id, next_number_);
  if (inserted) ++next_number_;
  return it->second;
}

void PrefixIndex::Forget(absl::string_view worker_id) {
  if (auto it = worker_numbers_.find(worker_id); it != worker_numbers_.end()) it->second = next_number_++;
}

void PrefixIndex::Match(absl::Span<const uint64_t> hashes, absl::Span<const std::string* const> workers,
                        std::vector<int64_t>& matched) {
  matched.assign(workers.size(), 0);
  numbers_.clear();
  for (const std::string* worker : workers) {
    const auto it = worker_numbers_.find(*worker);
    numbers_.push_back(it == worker_numbers_.end() ? kNoWorker : it->second);
  }
  size_t still_matching = numbers_.size() - std::count(numbers_.begin(), numbers_.end(), kNoWorker);
  for (size_t k = 0; k < hashes.size() && still_matching > 0; ++k) {
    const auto found = entries_.find(hashes[k]);
    if (found == entries_.end()) break;
    Entry& entry = found->second;
    entry.referenced = true;
    for (size_t w = 0; w < numbers_.size(); ++w) {
      if (numbers_[w] == kNoWorker || matched[w] != static_cast<int64_t>(k)) continue;
      if (std::find(entry.workers.begin(), entry.workers.end(), numbers_[w]) != entry.workers.end()) {
        ++matched[w];
      } else {
        --still_matching;
      }
    }
  }
}

void PrefixIndex::Record(absl::Span<const uint64_t> hashes, absl::string_view worker_id) {
  const int32_t number = Intern(worker_id);
  for (const uint64_t hash : hashes) {
    auto [it, inserted] = entries_.try_emplace(hash);
    Entry& entry = it->second;
    if (inserted) {
      entry.workers.fill(kNoWorker);
      clock_.push_back(hash);
    }
    entry.referenced = true;
    // Most recent first: move (or insert) the worker to the front, dropping the oldest.
    auto position = std::find(entry.workers.begin(), entry.workers.end(), number);
    if (position == entry.workers.end()) position = entry.workers.end() - 1;
    std::rotate(entry.workers.begin(), position, position + 1);
    entry.workers.front() = number;
    if (entries_.size() > capacity_) EvictOne();
  }
}

void PrefixIndex::EvictOne() {
  // Every entry is passed at most twice: once to clear its bit, once to evict it.
  for (size_t visited = 0; visited <= 2 * clock_.size(); ++visited) {
    if (hand_ >= clock_.size()) hand_ = 0;
    const uint64_t hash = clock_[hand_];
    Entry& entry = entries_.at(hash);
    if (entry.referenced) {
      entry.referenced = false;
      ++hand_;
      continue;
    }
    entries_.erase(hash);
    clock_[hand_] = clock_.back();
    clock_.pop_back();
    return;
  }
}

}  // namespace llmc::dispatch
