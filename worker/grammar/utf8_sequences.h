#ifndef LLMC_WORKER_GRAMMAR_UTF8_SEQUENCES_H_
#define LLMC_WORKER_GRAMMAR_UTF8_SEQUENCES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "worker/grammar/grammar.h"

namespace llmc::grammar {

struct ByteRange {
  uint8_t first = 0;
  uint8_t last = 0;
};

inline bool IsSurrogate(uint32_t code_point) { return code_point >= 0xD800 && code_point <= 0xDFFF; }

// Appends the UTF-8 encoding of `code_point` (a scalar value) to `out`.
void AppendUtf8(uint32_t code_point, std::string* out);

// The length of the well-formed UTF-8 character at the start of `text` and its code point; 0 if there is none
// (overlong forms, surrogates, values above U+10FFFF and cut-short sequences included).
size_t DecodeUtf8Char(absl::string_view text, uint32_t* code_point);

// The UTF-8 encodings of the code points in `range` as sequences of byte ranges: a code point is in the
// range exactly when its encoding matches one sequence (byte i within range i). Surrogates must already be
// excluded.
std::vector<std::vector<ByteRange>> Utf8Sequences(CodePointRange range);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_UTF8_SEQUENCES_H_
