#include "tools/bench/sse_parser.h"

#include "absl/strings/match.h"

namespace llmc::bench {

bool SseParser::Feed(absl::string_view bytes, std::vector<std::string>& events) {
  if (failed_) return false;
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the \n of a \r\n pair: the line already ended at \r
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      EndLine(events);
      continue;
    }
    line_.push_back(c);
    if (line_.size() > max_line_bytes_) {
      failed_ = true;
      return false;
    }
  }
  return true;
}

void SseParser::EndLine(std::vector<std::string>& events) {
  if (line_.empty()) {  // blank line: dispatch
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line_[0] == ':') {
    ++comments_;
  } else {
    absl::string_view line(line_);
    const size_t colon = line.find(':');
    const absl::string_view field = line.substr(0, colon);
    absl::string_view value = colon == absl::string_view::npos ? absl::string_view() : line.substr(colon + 1);
    if (absl::StartsWith(value, " ")) value.remove_prefix(1);
    if (field == "data") {
      if (has_data_) data_.push_back('\n');
      data_.append(value.data(), value.size());
      has_data_ = true;
    }
  }
  line_.clear();
}

}  // namespace llmc::bench
