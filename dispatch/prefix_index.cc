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
  // Its next pick interns it under a new number.
  worker_numbers_.erase(worker_id);
}

void PrefixIndex::Match(absl::Span<const uint64_t> hashes, absl::Span<const std::string* const> workers,
                        std::vector<int64_t>& matched) {
  matched.assign(workers.size(), 0);
  if (candidate_of_number_.size() < static_cast<size_t>(next_number_)) {
    candidate_of_number_.resize(static_cast<size_t>(next_number_), kNoWorker);
  }
  numbers_.clear();
  for (size_t w = 0; w < workers.size(); ++w) {
    const auto it = worker_numbers_.find(*workers[w]);
    if (it == worker_numbers_.end()) continue;
    candidate_of_number_[static_cast<size_t>(it->second)] = static_cast<int32_t>(w);
    numbers_.push_back(it->second);
  }
  // A hash stands for its whole prefix (the hashes are chained), so a worker holds as much as the deepest
  // hash that lists it, whether or not the entries before it still do: a popular first chunk's entry
  // turns over among many workers while the conversation's own later chunks keep theirs.
  for (size_t k = 0; k < hashes.size(); ++k) {
    const auto found = entries_.find(hashes[k]);
    if (found == entries_.end()) continue;
    Entry& entry = found->second;
    entry.referenced = true;
    for (const int32_t number : entry.workers) {
      if (number == kNoWorker) break;
      const int32_t candidate = candidate_of_number_[static_cast<size_t>(number)];
      if (candidate != kNoWorker) matched[static_cast<size_t>(candidate)] = static_cast<int64_t>(k) + 1;
    }
  }
  for (const int32_t number : numbers_) candidate_of_number_[static_cast<size_t>(number)] = kNoWorker;
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
