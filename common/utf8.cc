#include "common/utf8.h"

#include <cstdint>

namespace llmc {
namespace {

constexpr absl::string_view kReplacementCharacter = "\xEF\xBF\xBD";

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

Utf8Sequence ReadUtf8Sequence(absl::string_view data, size_t position) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(data[position + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {Utf8Sequence::Kind::kValid, 1};
  size_t length;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // no overlong forms
    if (lead == 0xED) second_max = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // no overlong forms
    if (lead == 0xF4) second_max = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Utf8Sequence::Kind::kInvalid, 1};  // continuation byte, C0, C1 or F5..FF
  }
  for (size_t i = 1; i < length; ++i) {
    if (position + i >= data.size()) return {Utf8Sequence::Kind::kIncomplete, i};
    const unsigned char next = byte(i);
    const bool ok = i == 1 ? (next >= second_min && next <= second_max) : IsContinuation(next);
    if (!ok) return {Utf8Sequence::Kind::kInvalid, i};
  }
  return {Utf8Sequence::Kind::kValid, length};
}

std::optional<size_t> FindInvalidUtf8(absl::string_view text) {
  size_t position = 0;
  while (position < text.size()) {
    // ASCII runs are the common case; skip them eight bytes at a time.
    while (position + 8 <= text.size()) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + position, 8);
      if (word & 0x8080808080808080ULL) break;
      position += 8;
    }
    if (position >= text.size()) break;
    const Utf8Sequence sequence = ReadUtf8Sequence(text, position);
    if (sequence.kind != Utf8Sequence::Kind::kValid) return position;
    position += sequence.length;
  }
  return std::nullopt;
}

std::string ReplaceInvalidUtf8(absl::string_view data) {
  std::string result;
  result.reserve(data.size());
  size_t position = 0;
  while (position < data.size()) {
    const Utf8Sequence sequence = ReadUtf8Sequence(data, position);
    if (sequence.kind == Utf8Sequence::Kind::kValid) {
      result.append(data.data() + position, sequence.length);
    } else {
      result.append(kReplacementCharacter.data(), kReplacementCharacter.size());
    }
    position += sequence.length;
  }
  return result;
}

}  // namespace llmc
