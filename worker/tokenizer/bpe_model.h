#ifndef LLMC_WORKER_TOKENIZER_BPE_MODEL_H_
#define LLMC_WORKER_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace llmc::tokenizer {

// Byte-level BPE: vocabulary and merge ranks from a tokenizer.json "model" object, applied to one
// pre-tokenized word at a time. Works on raw bytes; the byte-level alphabet is only the file's spelling.
// Thread-safe after construction (the word cache is sharded and locked).
class BpeModel {
 public:
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model);
  ~BpeModel();

  // Appends the ids of `word` (raw bytes of one pre-token).
  void EncodeWord(absl::string_view word, std::vector<int32_t>& ids) const;

  size_t vocab_size() const { return id_to_bytes_.size(); }
  // Raw bytes of a vocabulary token; empty for ids outside the vocabulary.
  absl::string_view TokenBytes(int32_t id) const;
  // The id of a token given as raw bytes, or -1.
  int32_t TokenId(absl::string_view bytes) const;

 private:
  struct MergeRule {
    int32_t rank;
    int32_t merged_id;
  };
  class WordCache;

  BpeModel();
  void ApplyMerges(absl::string_view word, std::vector<int32_t>& ids) const;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  absl::flat_hash_map<std::string, int32_t> bytes_to_id_;
  std::vector<std::string> id_to_bytes_;
  std::array<int32_t, 256> byte_ids_;
  absl::flat_hash_map<uint64_t, MergeRule> merges_;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_BPE_MODEL_H_
