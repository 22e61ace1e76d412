#ifndef LLMC_WORKER_TOKENIZER_NORMALIZER_H_
#define LLMC_WORKER_TOKENIZER_NORMALIZER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace llmc::tokenizer {

// The tokenizer.json "normalizer": null, a Unicode normal form (NFC, NFD, NFKC, NFKD, through
// utf8proc), or a Sequence of those. Anything else is refused by name when the file is loaded.
class Normalizer {
 public:
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& normalizer);

  bool empty() const { return forms_.empty(); }
  // `text` must be valid UTF-8.
  std::string Apply(absl::string_view text) const;

 private:
  enum class Form { kNfc, kNfd, kNfkc, kNfkd };
  std::vector<Form> forms_;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_NORMALIZER_H_
