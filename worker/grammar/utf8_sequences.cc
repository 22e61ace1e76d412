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

std::string Encode(uint32_t code_point) {
  std::string bytes;
  AppendUtf8(code_point, &bytes);
  return bytes;
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
  const std::string low = Encode(first);
  const std::string high = Encode(last);
  std::vector<ByteRange> sequence;
  for (size_t i = 0; i < low.size(); ++i) {
    sequence.push_back({static_cast<uint8_t>(low[i]), static_cast<uint8_t>(high[i])});
  }
  out.push_back(std::move(sequence));
}

}  // namespace

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

size_t DecodeUtf8Char(absl::string_view text, uint32_t* code_point) {
  if (text.empty()) return 0;
  const auto lead = static_cast<unsigned char>(text[0]);
  size_t length;
  uint32_t value;
  uint32_t min_value;
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, value = lead & 0x1F, min_value = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, value = lead & 0x0F, min_value = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, value = lead & 0x07, min_value = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if ((byte & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte & 0x3F);
  }
  if (value < min_value || value > kMaxCodePoint || IsSurrogate(value)) return 0;
  *code_point = value;
  return length;
}

std::vector<std::vector<ByteRange>> Utf8Sequences(CodePointRange range) {
  std::vector<std::vector<ByteRange>> out;
  if (range.first <= range.last) Split(range.first, range.last, out);
  return out;
}

}  // namespace llmc::grammar
