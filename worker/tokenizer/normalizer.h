#ifndef LLMC_WORKER_TOKENIZER_NORMALIZER_H_
#define LLMC_WORKER_TOKENIZER_NORMALIZER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace llmc::tokenizer {

// The tokenizer.json "normalizer": null, a Unicode normal form (NFC, NFD, NFKC, NFKD, through
// utf8proc), Prepend (SentencePiece's "▁" before non-empty text), Replace of a literal string, or a
// Sequence of those. Anything else is refused by name when the file is loaded.
class Normalizer {
 public:
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& normalizer);

  bool empty() const { return steps_.empty(); }
  // `text` must be valid UTF-8.
  std::string Apply(absl::string_view text) const;

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kPrepend, kReplace };
  struct Step {
    Kind kind;
    std::string pattern;  // kPrepend: the prefix; kReplace: the string replaced
    std::string content;  // kReplace: what replaces it
  };
  std::vector<Step> steps_;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_NORMALIZER_H_
