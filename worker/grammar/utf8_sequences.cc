#include "worker/grammar/utf8_sequences.h"

#include <string>

namespace llmc::grammar {
namespace {

// Largest code point encoded in 1, 2 and 3 bytes.
constexpr uint32_t kLengthLimits[] = {0x7F, 0x7FF, 0xFFFF};

int EncodedLength(uint32_t code_point) {
  if (code_point <= 0x7F) return 1;
  if (code_point <= 0x7FF) return 2;
  if (code_point <= 0xFFFF) return 3;
  return 4;
}

std::vector<uint8_t> Encode(uint32_t code_point) {
  switch (EncodedLength(code_point)) {
    case 1:
      return {static_cast<uint8_t>(code_point)};
    case 2:
      return {static_cast<uint8_t>(0xC0 | (code_point >> 6)), static_cast<uint8_t>(0x80 | (code_point & 0x3F))};
    case 3:
      return {static_cast<uint8_t>(0xE0 | (code_point >> 12)), static_cast<uint8_t>(0x80 | ((code_point >> 6) & 0x3F)),
              static_cast<uint8_t>(0x80 | (code_point & 0x3F))};
    default:
      return {static_cast<uint8_t>(0xF0 | (code_point >> 18)), static_cast<uint8_t>(0x80 | ((code_point >> 12) & 0x3F)),
              static_cast<uint8_t>(0x80 | ((code_point >> 6) & 0x3F)),
              static_cast<uint8_t>(0x80 | (code_point & 0x3F))};
  }
}

void Split(uint32_t first, uint32_t last, std::vector<std::vector<ByteRange>>& out) {
  for (const uint32_t limit : kLengthLimits) {
    if (first <= limit && limit < last) {
      Split(first, limit, out);
      Split(limit + 1, last, out);
      return;
    }
  }
  // Same length from here on. A range maps to one sequence of byte ranges only when, at every continuation
  // byte, it spans whole blocks of 64: split where it does not.
  const int length = EncodedLength(first);
  for (int i = 1; i < length; ++i) {
    const uint32_t low_bits = (1u << (6 * i)) - 1;
    if ((first & ~low_bits) == (last & ~low_bits)) continue;
    if ((first & low_bits) != 0) {
      Split(first, first | low_bits, out);
      Split((first | low_bits) + 1, last, out);
      return;
    }
    if ((last & low_bits) != low_bits) {
      Split(first, (last & ~low_bits) - 1, out);
      Split(last & ~low_bits, last, out);
      return;
    }
  }
  const std::vector<uint8_t> low = Encode(first);
  const std::vector<uint8_t> high = Encode(last);
  std::vector<ByteRange> sequence;
  for (size_t i = 0; i < low.size(); ++i) sequence.push_back({low[i], high[i]});
  out.push_back(std::move(sequence));
}

}  // namespace

std::vector<std::vector<ByteRange>> Utf8Sequences(CodePointRange range) {
  std::vector<std::vector<ByteRange>> out;
  if (range.first <= range.last) Split(range.first, range.last, out);
  return out;
}

}  // namespace llmc::grammar
