#ifndef LLMC_WORKER_TOKENIZER_STOP_STRING_MATCHER_H_
#define LLMC_WORKER_TOKENIZER_STOP_STRING_MATCHER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace llmc::tokenizer {

// Applies stop strings to streamed text. Text that might be the start of a stop string is held back
// until it is clearly not; when a stop string completes, the text before it is released and the stream
// stops. The stop string itself is never released unless `include_stop_string` (vLLM's
// include_stop_str_in_output).
class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_string = false);

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string completed; nothing more will be released
    std::string matched;   // which one
  };

  // Adds newly decoded text. After a stop, further calls release nothing. With `may_stop` false (the
  // request's min_tokens not reached yet) a completed stop string is released as text; a suffix that may
  // begin one is still held, so a stop string completed by later text stops the stream (as vLLM checks
  // stop strings from min_tokens on, over the output's tail).
  Result Add(absl::string_view text, bool may_stop = true);
  // End of generation without a stop: releases whatever was held back.
  std::string Finish();

 private:
  std::vector<std::string> stop_strings_;
  const bool include_stop_string_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_STOP_STRING_MATCHER_H_
