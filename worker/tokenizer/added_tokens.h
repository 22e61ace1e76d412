#ifndef LLMC_WORKER_TOKENIZER_ADDED_TOKENS_H_
#define LLMC_WORKER_TOKENIZER_ADDED_TOKENS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace llmc::tokenizer {

// One entry of tokenizer.json "added_tokens".
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// A piece of input text: either plain text for the normal pipeline, or one added token.
struct TextSegment {
  absl::string_view text;
  int32_t token_id = -1;  // >= 0 for an added token
};

// Finds added tokens in text before normalisation and BPE, as Hugging Face does: leftmost match first,
// longest at that position, honouring lstrip / rstrip / single_word.
class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Splits `text`; segments point into `text`.
  void Split(absl::string_view text, std::vector<TextSegment>& segments) const;
  bool empty() const { return tokens_.empty(); }

 private:
  bool MatchAt(absl::string_view text, size_t position, size_t* match_length, const AddedToken** token) const;

  std::vector<AddedToken> tokens_;
  // Gemma has 6,400 added tokens: a match is a hash lookup per distinct length, not a scan of them all.
  absl::flat_hash_map<std::string, size_t> index_by_content_;   // into tokens_; the first wins
  std::array<std::vector<size_t>, 256> lengths_by_first_byte_;  // distinct lengths, longest first
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_ADDED_TOKENS_H_
