#ifndef LLMC_WORKER_ENGINE_BEAM_HISTORY_H_
#define LLMC_WORKER_ENGINE_BEAM_HISTORY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llmc/v1/types.pb.h"

namespace llmc::engine {

// A beam's output so far (beam_search_action.h): its tokens, with each token's text and logprob entry, as a
// chain of one node per token that beams share with the beams they came from. Extending a beam adds one
// node whatever its length; the nodes of beams that end without a descendant are freed by reference
// counting. The whole output is laid out only for the beams that go out. Engine thread only.
class BeamHistory {
 public:
  BeamHistory() = default;  // no output yet

  // This history followed by `token`, with the text it released and its logprob entries (none without
  // logprobs).
  BeamHistory Extend(int32_t token, std::string text, std::vector<v1::TokenLogprob> logprobs) const {
    BeamHistory next;
    next.last_ = std::make_shared<const Node>(last_, token, std::move(text), std::move(logprobs));
    return next;
  }

  int64_t size() const { return last_ == nullptr ? 0 : last_->length; }
  int32_t last_token() const { return last_->token; }

  // How many leading tokens `a` and `b` share: the depth of their last common node. Walks only the nodes
  // after it.
  static int64_t CommonLength(const BeamHistory& a, const BeamHistory& b) {
    const Node* x = a.last_.get();
    const Node* y = b.last_.get();
    while (x != y) {
      if (x == nullptr || (y != nullptr && y->length > x->length)) {
        y = y->parent.get();
      } else {
        x = x->parent.get();
      }
    }
    return x == nullptr ? 0 : x->length;
  }

  // The whole output, first token first.
  struct Output {
    std::vector<int32_t> tokens;
    std::string text;
    std::vector<v1::TokenLogprob> logprobs;
  };
  Output Lay() const {
    std::vector<const Node*> nodes;
    nodes.reserve(static_cast<size_t>(size()));
    for (const Node* node = last_.get(); node != nullptr; node = node->parent.get()) nodes.push_back(node);
    Output output;
    output.tokens.reserve(nodes.size());
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      output.tokens.push_back((*it)->token);
      output.text += (*it)->text;
      output.logprobs.insert(output.logprobs.end(), (*it)->logprobs.begin(), (*it)->logprobs.end());
    }
    return output;
  }

 private:
  struct Node {
    Node(std::shared_ptr<const Node> parent, int32_t token, std::string text, std::vector<v1::TokenLogprob> logprobs)
        : parent(std::move(parent)),
          token(token),
          length(this->parent == nullptr ? 1 : this->parent->length + 1),
          text(std::move(text)),
          logprobs(std::move(logprobs)) {}
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;
    // Frees the chain of nodes that only this one holds in a loop, not by recursion as deep as the output.
    ~Node() {
      std::shared_ptr<const Node> next = std::move(parent);
      while (next != nullptr && next.use_count() == 1) next = std::move(next->parent);
    }

    mutable std::shared_ptr<const Node> parent;  // mutable for the destructor's unlinking only
    const int32_t token;
    const int64_t length;  // tokens up to and including this one
    const std::string text;
    const std::vector<v1::TokenLogprob> logprobs;
  };

  std::shared_ptr<const Node> last_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_BEAM_HISTORY_H_
