#include "worker/tokenizer/stop_string_matcher.h"

#include <algorithm>

namespace llmc::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_string)
    : stop_strings_(std::move(stop_strings)), include_stop_string_(include_stop_string) {
  stop_strings_.erase(std::remove(stop_strings_.begin(), stop_strings_.end(), std::string()), stop_strings_.end());
}

StopStringMatcher::Result StopStringMatcher::Add(absl::string_view text, bool may_stop) {
  Result result;
  if (stopped_) return result;
  held_.append(text.data(), text.size());

  // The stop string that completes first (smallest end), as if the text had arrived byte by byte.
  size_t best_start = std::string::npos, best_end = std::string::npos;
  const std::string* best = nullptr;
  // Under min_tokens nothing may stop the stream: no completed stop string is looked for.
  if (may_stop) {
    for (const auto& stop : stop_strings_) {
      const size_t start = held_.find(stop);
      if (start == std::string::npos) continue;
      const size_t end = start + stop.size();
      if (end < best_end || (end == best_end && start < best_start)) {
        best_start = start;
        best_end = end;
        best = &stop;
      }
    }
  }
  if (best != nullptr) {
    result.text = held_.substr(0, include_stop_string_ ? best_end : best_start);
    result.stopped = stopped_ = true;
    result.matched = *best;
    held_.clear();
    return result;
  }

  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& stop : stop_strings_) {
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length) {
      if (absl::string_view(held_).substr(held_.size() - length) == absl::string_view(stop).substr(0, length)) {
        keep = length;
        break;
      }
    }
  }
  result.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return result;
}

std::string StopStringMatcher::Finish() {
  if (stopped_) return {};
  std::string rest = std::move(held_);
  held_.clear();
  return rest;
}

}  // namespace llmc::tokenizer
