#ifndef LLMC_WORKER_GRAMMAR_VOCABULARY_H_
#define LLMC_WORKER_GRAMMAR_VOCABULARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace llmc::grammar {

// A tokenizer's vocabulary as the grammar engine reads it, built once per worker: the byte strings of the
// ordinary tokens in a trie laid out in depth-first order (so a subtree is a contiguous range and a walk
// that rejects a prefix skips its whole subtree in one jump), and the end tokens. Special tokens other than
// the end tokens are left out: no grammar can produce them.
class VocabularyIndex {
 public:
  struct Node {
    uint8_t byte = 0;           // the edge from the parent (unused for the root)
    bool more_tokens = false;   // more than first_token ends here (tokens with equal bytes)
    uint16_t depth = 0;         // bytes from the root
    uint32_t first_token = 0;   // the first token ending here, or no_token()
    uint32_t subtree_end = 0;   // one past the last node of this node's subtree
    uint32_t tokens_begin = 0;  // tokens_ range of the tokens whose bytes end here
    uint32_t tokens_end = 0;
  };

  // `token_bytes[id]` for every id below `vocab_size`; empty strings and ids in `special` are left out,
  // except `end_tokens`, which count as ending the output wherever the grammar may end.
  VocabularyIndex(const std::vector<std::string>& token_bytes, const std::vector<bool>& special,
                  const std::vector<int32_t>& end_tokens);

  size_t vocab_size() const { return token_bytes_.size(); }
  // Node::first_token where no token ends: one past the vocabulary, so that a walk may set its bit in a
  // bitset one bit longer instead of branching.
  uint32_t no_token() const { return static_cast<uint32_t>(token_bytes_.size()); }
  // Unique per index in this process (never reused), for caches of what is derived from it.
  uint64_t id() const { return id_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Token ids grouped by the node their bytes end at, in node order.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  // The longest indexed token, in bytes.
  uint32_t max_depth() const { return max_depth_; }
  bool IsEndToken(int32_t id) const;
  // Whether the token can appear under a grammar (an ordinary, non-empty token).
  bool IsIndexed(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < indexed_.size() && indexed_[id]; }
  absl::string_view TokenBytes(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < token_bytes_.size() ? absl::string_view(token_bytes_[id])
                                                                    : absl::string_view();
  }

 private:
  uint64_t id_;
  std::vector<std::string> token_bytes_;
  std::vector<bool> indexed_;
  std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
  std::vector<int32_t> tokens_;
  std::vector<int32_t> end_tokens_;
  uint32_t max_depth_ = 0;
};

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_VOCABULARY_H_
