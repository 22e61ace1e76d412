#ifndef LLMC_WORKER_TOKENIZER_BYTE_LEVEL_H_
#define LLMC_WORKER_TOKENIZER_BYTE_LEVEL_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace llmc::tokenizer {

// GPT-2's reversible map from each byte to a printable character, which byte-level BPE vocabularies
// are written in (a space is "Ġ", a newline "Ċ").
class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& Get();

  // The UTF-8 encoding of the character that stands for `byte`.
  const std::string& CharFor(uint8_t byte) const { return byte_to_char_[byte]; }
  // Raw bytes of `text` written in the alphabet; nullopt when a character is outside it.
  std::optional<std::string> ToBytes(absl::string_view text) const;
  // `bytes` written in the alphabet.
  std::string FromBytes(absl::string_view bytes) const;

 private:
  ByteLevelAlphabet();

  std::array<std::string, 256> byte_to_char_;
  absl::flat_hash_map<uint32_t, uint8_t> codepoint_to_byte_;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_BYTE_LEVEL_H_
