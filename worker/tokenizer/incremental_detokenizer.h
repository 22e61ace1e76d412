#ifndef LLMC_WORKER_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define LLMC_WORKER_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::tokenizer {

// Turns generated tokens into text one token at a time for streaming. Bytes that end inside a UTF-8
// character are held back until the character is complete, so a CJK character or an emoji split across
// tokens never comes out in halves. The concatenated output equals Tokenizer::Decode of all the tokens.
class IncrementalDetokenizer {
 public:
  // `kept_special_tokens` (sorted; must outlive this) are decoded even when special tokens are skipped.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = true,
                         absl::Span<const int32_t> kept_special_tokens = {})
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens), kept_special_tokens_(kept_special_tokens) {}

  // The text completed by `token_id` (often empty while a character is incomplete). Ids outside the
  // tokenizer's vocabulary (padding rows of a model's output layer) add nothing.
  std::string Add(int32_t token_id);
  // At the end of the stream: bytes still held back, as U+FFFD.
  std::string Finish();

 private:
  const Tokenizer& tokenizer_;
  const bool skip_special_tokens_;
  const absl::Span<const int32_t> kept_special_tokens_;
  std::string pending_;  // at most 3 bytes: the start of an incomplete character
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
