#ifndef LLMC_WORKER_TOKENIZER_BPE_MODEL_H_
#define LLMC_WORKER_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"
#include "worker/tokenizer/token_strings.h"

namespace llmc::tokenizer {

// What a word's first symbols are before any merge.
enum class BpeSymbols {
  // Bytes (GPT-2, Qwen, Llama 3): the vocabulary is spelled in the byte-level alphabet, which is only the
  // file's spelling; the model works on raw bytes, and every byte has a token.
  kBytes,
  // Unicode characters (SentencePiece-style: Llama 2, Mistral, Gemma): the vocabulary is plain UTF-8
  // text. A character without a token becomes its UTF-8 bytes as "<0xNN>" tokens (byte_fallback), else
  // the unknown token (consecutive ones fused into one with fuse_unk).
  kCharacters,
};

// BPE: vocabulary and merge ranks from a tokenizer.json "model" object, applied to one pre-tokenized
// word at a time. Thread-safe after construction (the word cache is sharded and locked).
class BpeModel {
 public:
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model, BpeSymbols symbols);
  ~BpeModel();

  // Appends the ids of `word` (one pre-token, valid UTF-8 for kCharacters).
  void EncodeWord(absl::string_view word, std::vector<int32_t>& ids) const;
  BpeSymbols symbols() const { return symbols_; }

  size_t vocab_size() const { return tokens_.size(); }
  // A vocabulary token: raw bytes for kBytes, its text for kCharacters; empty for ids outside the
  // vocabulary.
  absl::string_view TokenBytes(int32_t id) const;
  // The id of a token given as TokenBytes spells it, or -1.
  int32_t TokenId(absl::string_view bytes) const;

 private:
  struct MergeRule {
    int32_t rank;
    int32_t merged_id;
  };
  class WordCache;

  BpeModel();
  absl::Status ReadVocab(const nlohmann::json& vocab);
  absl::Status ReadMerges(const nlohmann::json& merges);
  // The symbols of `word` before merging.
  void InitialSymbols(absl::string_view word, std::vector<int32_t>& symbols) const;
  void ApplyMerges(const std::vector<int32_t>& symbols, std::vector<int32_t>& ids) const;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  TokenStrings tokens_;  // by id, and looked up by their bytes
  BpeSymbols symbols_ = BpeSymbols::kBytes;
  std::array<int32_t, 256> byte_ids_;  // kCharacters: the "<0xNN>" tokens, -1 where absent or not byte_fallback
  absl::flat_hash_map<uint64_t, MergeRule> merges_;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_BPE_MODEL_H_
