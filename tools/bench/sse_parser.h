#ifndef LLMC_TOOLS_BENCH_SSE_PARSER_H_
#define LLMC_TOOLS_BENCH_SSE_PARSER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace llmc::bench {

// Incremental Server-Sent Events parser: bytes in, whole events out. Lines end with \n, \r\n or \r; an
// empty line ends an event; `data:` lines (one optional space after the colon) are joined with \n;
// comment lines (":") and other fields (event, id, retry) are ignored. An event's data is returned only
// once its blank line arrived. A line longer than `max_line_bytes` is an error (the stream is not SSE).
class SseParser {
 public:
  explicit SseParser(size_t max_line_bytes = 16 << 20) : max_line_bytes_(max_line_bytes) {}

  // Appends `bytes` and returns the data of every event they completed. Returns false (and stops
  // parsing) when a line grew past the limit.
  bool Feed(absl::string_view bytes, std::vector<std::string>& events);

  // Comment lines seen so far (keep-alive pings).
  size_t comments() const { return comments_; }

 private:
  void EndLine(std::vector<std::string>& events);

  size_t max_line_bytes_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
  bool failed_ = false;
  size_t comments_ = 0;
};

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_SSE_PARSER_H_
