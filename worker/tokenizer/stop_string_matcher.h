#ifndef LLMC_WORKER_TOKENIZER_STOP_STRING_MATCHER_H_
#define LLMC_WORKER_TOKENIZER_STOP_STRING_MATCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace llmc::tokenizer {

// Applies stop strings to streamed text. Text that might be the start of a stop string is held back
// until it is clearly not; when a stop string completes, the text before it is released and the stream
// stops. The stop string itself is never released unless `include_stop_string` (vLLM's
// include_stop_str_in_output). When several stop strings complete, the one that completes first wins (the
// longest of those ending at the same byte).
//
// The stop strings become one Aho–Corasick automaton, built once and shared by copies of the matcher (the
// choices and beams of a request); a matcher keeps its state in it between calls, so each byte fed costs
// amortized constant work whatever the stop strings (request_limits.h caps their count and length, which
// bounds the automaton and the held-back text). Copying a matcher copies only the held-back text.
class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_string = false);

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string completed; nothing more will be released
    std::string matched;   // which one
  };

  // Adds newly decoded text. After a stop, further calls release nothing. With `may_stop` false (the
  // request's min_tokens not reached yet) a stop string completed by this text is released as text; a suffix
  // that may begin one is still held, so a stop string completed by later text stops the stream (as vLLM
  // checks stop strings from min_tokens on, over the output's tail).
  Result Add(absl::string_view text, bool may_stop = true);
  // End of generation without a stop: releases whatever was held back.
  std::string Finish();

  // Instrumentation for tests: the automaton transitions (failure links included) and the held-back bytes
  // moved so far. Linear in the bytes fed.
  uint64_t work() const { return work_; }

 private:
  class Automaton;

  std::shared_ptr<const Automaton> automaton_;  // null without stop strings
  bool include_stop_string_;
  // Text fed and not yet released is buffer_[released_, end): exactly the bytes of the automaton state
  // (the longest suffix of the text that is a proper prefix of a stop string). The released front is
  // erased once it outgrows the rest, so that erasing costs amortized constant work per byte.
  std::string buffer_;
  size_t released_ = 0;
  int32_t state_ = 0;
  bool stopped_ = false;
  uint64_t work_ = 0;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_STOP_STRING_MATCHER_H_
