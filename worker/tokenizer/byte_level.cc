#include "worker/tokenizer/byte_level.h"

#include "common/utf8.h"

namespace llmc::tokenizer {
namespace {

std::string EncodeCodepoint(uint32_t codepoint) {
  std::string out;
  if (codepoint < 0x80) {
    out.push_back(static_cast<char>(codepoint));
  } else if (codepoint < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (codepoint >> 6)));
    out.push_back(static_cast<char>(0x80 | (codepoint & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (codepoint >> 12)));
    out.push_back(static_cast<char>(0x80 | ((codepoint >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (codepoint & 0x3F)));
  }
  return out;
}

}  // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  // Printable Latin-1 bytes stand for themselves; the others are shifted past U+00FF in byte order.
  uint32_t next_shifted = 256;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    const uint32_t codepoint = printable ? byte : next_shifted++;
    byte_to_char_[byte] = EncodeCodepoint(codepoint);
    codepoint_to_byte_[codepoint] = static_cast<uint8_t>(byte);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::Get() {
  static const ByteLevelAlphabet* const alphabet = new ByteLevelAlphabet();
  return *alphabet;
}

std::optional<std::string> ByteLevelAlphabet::ToBytes(absl::string_view text) const {
  std::string bytes;
  bytes.reserve(text.size());
  size_t position = 0;
  while (position < text.size()) {
    const Utf8Sequence sequence = ReadUtf8Sequence(text, position);
    if (sequence.kind != Utf8Sequence::Kind::kValid || sequence.length > 2) return std::nullopt;
    uint32_t codepoint = static_cast<unsigned char>(text[position]);
    if (sequence.length == 2) {
      codepoint = ((codepoint & 0x1F) << 6) | (static_cast<unsigned char>(text[position + 1]) & 0x3F);
    }
    const auto it = codepoint_to_byte_.find(codepoint);
    if (it == codepoint_to_byte_.end()) return std::nullopt;
    bytes.push_back(static_cast<char>(it->second));
    position += sequence.length;
  }
  return bytes;
}

std::string ByteLevelAlphabet::FromBytes(absl::string_view bytes) const {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) text += byte_to_char_[byte];
  return text;
}

}  // namespace llmc::tokenizer
