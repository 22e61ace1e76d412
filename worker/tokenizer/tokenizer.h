#ifndef LLMC_WORKER_TOKENIZER_TOKENIZER_H_
#define LLMC_WORKER_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/tokenizer/added_tokens.h"
#include "worker/tokenizer/bpe_model.h"
#include "worker/tokenizer/normalizer.h"
#include "worker/tokenizer/split_pattern.h"
#include "worker/tokenizer/token_strings.h"

namespace llmc::tokenizer {

// SentencePiece's word marker, "▁" (U+2581).
inline constexpr absl::string_view kMetaspaceReplacement = "\xE2\x96\x81";

// The Metaspace pre-tokenizer: spaces become the replacement, which is also put before the text.
struct Metaspace {
  enum class Prepend { kAlways, kFirst, kNever };  // kFirst: only before the text's first section
  bool enabled = false;
  std::string replacement;
  Prepend prepend = Prepend::kAlways;
  bool split = true;  // each word, starting with the replacement, is a piece of its own
};

// A BPE tokenizer loaded from a Hugging Face tokenizer.json, encoding and decoding exactly as the
// Hugging Face `tokenizers` library does:
//   added/special tokens split out first → normalizer → pre-tokenizer → BPE per piece.
// Byte-level files (Qwen2/2.5/3, Llama 3, GPT-2: NFC, a split regex, BPE over bytes) and SentencePiece-style
// ones (Llama 2, Mistral, Gemma: "▁" for spaces through Prepend/Replace normalizers or Metaspace, BPE over
// characters with "<0xNN>" byte fallback, a decoder that strips the leading space) are both supported.
// Immutable after loading and safe to share between threads.
class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(absl::string_view json_text);

  // INVALID_ARGUMENT for text that is not valid UTF-8 (naming the byte offset). Special tokens written
  // in the text are recognised. `add_special_tokens` applies the file's post-processor template (e.g.
  // Llama 3's BOS).
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text, bool add_special_tokens = false) const;
  absl::StatusOr<size_t> CountTokens(absl::string_view text) const;

  // Text of `ids`; invalid UTF-8 produced by odd id sequences becomes U+FFFD. INVALID_ARGUMENT for ids
  // outside the vocabulary. SentencePiece-style decoders drop the text's leading space here (as Hugging
  // Face's decode does), but not in TokenBytes: generated text continues the prompt, so its first space
  // is real.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = true) const;

  // The raw bytes decoding emits for one token (may be part of a UTF-8 character); empty for ids outside
  // the vocabulary.
  absl::string_view TokenBytes(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // The id of an added token by its content (e.g. "<|im_end|>"), else of a vocabulary token by its text;
  // -1 when neither exists.
  int32_t TokenId(absl::string_view token) const;
  // One past the largest id.
  size_t vocab_size() const { return id_to_bytes_.size(); }

 private:
  Tokenizer() = default;
  // `first_section`: `text` starts the input (no added token before it).
  void EncodePlain(absl::string_view text, bool first_section, std::vector<int32_t>& ids) const;
  void EncodeNormalized(absl::string_view text, bool first_section, std::vector<int32_t>& ids) const;
  void EncodePieces(absl::string_view text, std::vector<int32_t>& ids) const;

  std::unique_ptr<BpeModel> model_;
  Normalizer normalizer_;
  std::unique_ptr<SplitPattern> split_;  // null: the whole segment is one piece
  bool add_prefix_space_ = false;
  Metaspace metaspace_;
  size_t strip_leading_spaces_ = 0;                      // dropped from the start of decoded text
  std::unique_ptr<AddedTokenMatcher> raw_added_;         // matched before normalisation
  std::unique_ptr<AddedTokenMatcher> normalized_added_;  // matched after it
  std::vector<AddedToken> added_tokens_;
  std::vector<int32_t> template_prefix_;  // post-processor ids around the sequence
  std::vector<int32_t> template_suffix_;
  TokenStrings id_to_bytes_;
  std::vector<bool> special_;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_TOKENIZER_H_
