#include "worker/grammar/vocabulary.h"

#include <algorithm>
#include <atomic>
#include <numeric>

namespace llmc::grammar {
namespace {

std::atomic<uint64_t> next_id{1};

}  // namespace

VocabularyIndex::VocabularyIndex(const std::vector<std::string>& token_bytes, const std::vector<bool>& special,
                                 const std::vector<int32_t>& end_tokens)
    : id_(next_id.fetch_add(1)), token_bytes_(token_bytes), indexed_(token_bytes.size(), false) {
  for (const int32_t id : end_tokens) {
    if (id >= 0 && static_cast<size_t>(id) < token_bytes_.size() && !IsEndToken(id)) end_tokens_.push_back(id);
  }
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    const bool is_special = id < special.size() && special[id];
    // Longer tokens than a node's depth can count are never generated under a grammar.
    if (token_bytes_[id].empty() || token_bytes_[id].size() > UINT16_MAX || is_special ||
        IsEndToken(static_cast<int32_t>(id))) {
      continue;
    }
    indexed_[id] = true;
    order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [this](int32_t a, int32_t b) {
    return token_bytes_[a] != token_bytes_[b] ? token_bytes_[a] < token_bytes_[b] : a < b;
  });
  // Sorted strings give the trie in depth-first order: a string's path is the previous string's path cut
  // back to their common prefix, then extended; every token lands right after its node is made.
  Node root;
  root.first_token = no_token();
  nodes_.push_back(root);
  std::vector<uint32_t> path = {0};  // node indexes from the root
  const auto close_to = [&](size_t length) {
    while (path.size() > length + 1) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
  };
  const std::string* previous = nullptr;
  for (const int32_t id : order) {
    const std::string& bytes = token_bytes_[id];
    size_t common = 0;
    if (previous != nullptr) {
      const size_t limit = std::min(previous->size(), bytes.size());
      while (common < limit && (*previous)[common] == bytes[common]) ++common;
    }
    close_to(common);
    for (size_t i = common; i < bytes.size(); ++i) {
      Node node;
      node.byte = static_cast<uint8_t>(bytes[i]);
      node.depth = static_cast<uint16_t>(std::min<size_t>(i + 1, UINT16_MAX));
      node.tokens_begin = node.tokens_end = static_cast<uint32_t>(tokens_.size());
      node.first_token = no_token();
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(node);
    }
    max_depth_ = std::max<uint32_t>(max_depth_, static_cast<uint32_t>(bytes.size()));
    tokens_.push_back(id);
    Node& last = nodes_[path.back()];
    last.tokens_end = static_cast<uint32_t>(tokens_.size());
    if (last.first_token == no_token()) {
      last.first_token = static_cast<uint32_t>(id);
    } else {
      last.more_tokens = true;
    }
    previous = &bytes;
  }
  close_to(0);
  nodes_[0].subtree_end = static_cast<uint32_t>(nodes_.size());
}

bool VocabularyIndex::IsEndToken(int32_t id) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), id) != end_tokens_.end();
}

}  // namespace llmc::grammar
