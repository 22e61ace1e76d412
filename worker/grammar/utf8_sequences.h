#ifndef LLMC_WORKER_GRAMMAR_UTF8_SEQUENCES_H_
#define LLMC_WORKER_GRAMMAR_UTF8_SEQUENCES_H_

#include <cstdint>
#include <vector>

#include "worker/grammar/grammar.h"

namespace llmc::grammar {

struct ByteRange {
  uint8_t first = 0;
  uint8_t last = 0;
};

// The UTF-8 encodings of the code points in `range` as sequences of byte ranges: a code point is in the
// range exactly when its encoding matches one sequence (byte i within range i). Surrogates must already be
// excluded.
std::vector<std::vector<ByteRange>> Utf8Sequences(CodePointRange range);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_UTF8_SEQUENCES_H_
