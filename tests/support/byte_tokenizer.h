#ifndef LLMC_TESTS_SUPPORT_BYTE_TOKENIZER_H_
#define LLMC_TESTS_SUPPORT_BYTE_TOKENIZER_H_

#include <cstdint>
#include <memory>

#include "worker/tokenizer/tokenizer.h"

namespace llmc::testing {

// Ids of the byte tokenizer's special tokens (ids 0..255 are the bytes themselves).
inline constexpr int32_t kEndOfText = 256;  // <|endoftext|>
inline constexpr int32_t kImStart = 257;    // <|im_start|>
inline constexpr int32_t kImEnd = 258;      // <|im_end|>

// A byte-level tokenizer without merges: every byte is its own token, plus the ChatML special tokens above.
// Small enough to reason about in unit tests ("hi" is {104, 105}).
std::unique_ptr<tokenizer::Tokenizer> MakeByteTokenizer();

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_BYTE_TOKENIZER_H_
