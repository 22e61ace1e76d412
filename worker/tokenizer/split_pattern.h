#ifndef LLMC_WORKER_TOKENIZER_SPLIT_PATTERN_H_
#define LLMC_WORKER_TOKENIZER_SPLIT_PATTERN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc::tokenizer {

// What a split does with the text a match covers (the tokenizer.json `Split` behavior).
enum class SplitBehavior {
  kIsolated,            // every match is a piece, and so is any text between matches
  kMergedWithPrevious,  // a match ends the piece before it
  kMergedWithNext,      // a match starts the piece after it
  kRemoved,             // matches are dropped
};

// A pre-tokenizer regex (the tokenizer.json `Split` pattern), compiled once with PCRE2 (UTF, Unicode
// properties, JIT). `\s` and `\S` are rewritten to Unicode White_Space, which is what Hugging Face
// tokenizers match. Thread-safe.
class SplitPattern {
 public:
  static absl::StatusOr<std::unique_ptr<SplitPattern>> Compile(absl::string_view pattern,
                                                               SplitBehavior behavior = SplitBehavior::kIsolated);
  ~SplitPattern();

  // Appends the non-empty pieces of `text` (valid UTF-8) in order; they cover `text` exactly, except the
  // matches a kRemoved split drops.
  void Split(absl::string_view text, std::vector<absl::string_view>& pieces) const;

 private:
  struct Compiled;
  SplitPattern(std::unique_ptr<Compiled> compiled, SplitBehavior behavior);
  std::unique_ptr<Compiled> compiled_;
  SplitBehavior behavior_;
};

// The pattern with `\s` / `\S` replaced by explicit White_Space classes (exposed for tests).
std::string RewriteWhitespaceClasses(absl::string_view pattern);

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_SPLIT_PATTERN_H_
