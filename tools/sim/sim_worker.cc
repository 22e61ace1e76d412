#include "tools/sim/sim_worker.h"

#include <algorithm>

namespace llmc::sim {

double SimWorker::kv_usage() const {
  return static_cast<double>(private_blocks_ + static_cast<int64_t>(cached_.size())) /
         static_cast<double>(limits_.kv_blocks);
}

int64_t SimWorker::pending_prefill_tokens() const {
  int64_t tokens = 0;
  for (const SimRequest* request : waiting_) tokens += request->prompt_tokens;
  for (const SimRequest* request : running_) tokens += request->prefill_left;
  return tokens;
}

int64_t SimWorker::CachedPrefixBlocks(const SimRequest& request) {
  // The last prompt token is always computed.
  const int64_t most = (request.prompt_tokens - 1) / limits_.block_size;
  int64_t found = 0;
  for (; found < most && found < static_cast<int64_t>(request.blocks.size()); ++found) {
    const auto it = cached_.find(request.blocks[static_cast<size_t>(found)]);
    if (it == cached_.end()) break;
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  return found;
}

void SimWorker::EvictTo(int64_t free_blocks_wanted) {
  while (!lru_.empty() &&
         limits_.kv_blocks - private_blocks_ - static_cast<int64_t>(cached_.size()) < free_blocks_wanted) {
    cached_.erase(lru_.back());
    lru_.pop_back();
  }
}

void SimWorker::CacheBlocks(const SimRequest& request) {
  for (const uint64_t hash : request.blocks) {
    if (const auto it = cached_.find(hash); it != cached_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      continue;
    }
    EvictTo(1);
    if (limits_.kv_blocks - private_blocks_ - static_cast<int64_t>(cached_.size()) < 1) return;
    lru_.push_front(hash);
    cached_[hash] = lru_.begin();
  }
}

void SimWorker::Admit() {
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < limits_.max_running) {
    SimRequest* request = waiting_.front();
    const int64_t cached = CachedPrefixBlocks(*request);
    const int64_t total_blocks =
        (request->prompt_tokens + request->output_tokens + limits_.block_size - 1) / limits_.block_size;
    const int64_t needed = total_blocks - cached;
    EvictTo(needed);
    if (limits_.kv_blocks - private_blocks_ - static_cast<int64_t>(cached_.size()) < needed && !running_.empty()) {
      return;  // waits for memory
    }
    waiting_.pop_front();
    request->cached_tokens = cached * limits_.block_size;
    request->prefill_left = request->prompt_tokens - request->cached_tokens;
    request->private_blocks = needed;
    private_blocks_ += needed;
    running_.push_back(request);
  }
}

double SimWorker::Step(double now, std::vector<SimRequest*>& finished) {
  Admit();
  int64_t budget = limits_.max_num_batched_tokens;
  int64_t decode = 0, prefill = 0;
  std::vector<std::pair<SimRequest*, int64_t>> chunks;
  for (SimRequest* request : running_) {
    if (request->prefill_left == 0) ++decode;
  }
  budget -= decode;
  for (SimRequest* request : running_) {
    if (request->prefill_left == 0 || budget <= 0) continue;
    const int64_t chunk = std::min(request->prefill_left, budget);
    chunks.emplace_back(request, chunk);
    budget -= chunk;
    prefill += chunk;
  }
  const double duration = model_.StepSeconds(decode, prefill);
  if (prefill > 0) prefill_rate_.Add(static_cast<double>(prefill), duration);
  const double end = now + duration;
  for (SimRequest* request : running_) {
    if (request->prefill_left == 0) ++request->generated;
  }
  for (auto& [request, chunk] : chunks) {
    request->prefill_left -= chunk;
    if (request->prefill_left == 0) {
      request->first_token_s = end;
      request->generated = 1;
    }
  }
  auto done = std::partition(running_.begin(), running_.end(), [](const SimRequest* request) {
    return request->first_token_s < 0 || request->generated < request->output_tokens;
  });
  for (auto it = done; it != running_.end(); ++it) {
    SimRequest* request = *it;
    request->done_s = end;
    private_blocks_ -= request->private_blocks;
    CacheBlocks(*request);
    finished.push_back(request);
  }
  running_.erase(done, running_.end());
  return duration;
}

}  // namespace llmc::sim
