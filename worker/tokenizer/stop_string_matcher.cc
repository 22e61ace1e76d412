#include "worker/tokenizer/stop_string_matcher.h"

#include <algorithm>
#include <map>
#include <utility>

namespace llmc::tokenizer {

// The trie of the stop strings with failure links. A node stands for a prefix of some stop string (the
// root for the empty one); reading text, the current node is the longest suffix of the text that is such a
// prefix. Immutable once built.
class StopStringMatcher::Automaton {
 public:
  static constexpr int32_t kNone = -1;

  explicit Automaton(std::vector<std::string> stop_strings) : stop_strings_(std::move(stop_strings)) {
    std::vector<std::map<unsigned char, int32_t>> children(1);
    nodes_.emplace_back();
    for (size_t s = 0; s < stop_strings_.size(); ++s) {
      int32_t node = 0;
      for (const char c : stop_strings_[s]) {
        auto [it, added] = children[node].emplace(static_cast<unsigned char>(c), static_cast<int32_t>(nodes_.size()));
        if (added) {
          nodes_.emplace_back();
          nodes_.back().depth = nodes_[node].depth + 1;
          children.emplace_back();
        }
        node = it->second;
      }
      // A repeated stop string keeps its first entry.
      if (nodes_[node].stop == kNone) nodes_[node].stop = static_cast<int32_t>(s);
    }
    // Edges flattened in node order, sorted by byte within a node.
    for (size_t v = 0; v < nodes_.size(); ++v) {
      nodes_[v].first_edge = static_cast<uint32_t>(edges_.size());
      nodes_[v].num_edges = static_cast<uint32_t>(children[v].size());
      for (const auto& [byte, child] : children[v]) edges_.push_back({byte, child});
    }
    // Failure, output and hold links in breadth-first order: a node's links point to shallower nodes.
    std::vector<int32_t> order = {0};
    nodes_[0].hold = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const int32_t v = order[i];
      Node& node = nodes_[v];
      if (v != 0) {
        const Node& fail = nodes_[node.fail];
        node.output = fail.stop != kNone ? node.fail : fail.output;
        node.hold = node.num_edges > 0 ? v : fail.hold;
      }
      for (uint32_t e = node.first_edge; e < node.first_edge + node.num_edges; ++e) {
        const auto [byte, child] = edges_[e];
        int32_t fail = 0;
        if (v != 0) {
          fail = nodes_[v].fail;
          while (fail != 0 && Child(fail, byte) == kNone) fail = nodes_[fail].fail;
          const int32_t next = Child(fail, byte);
          fail = next == kNone ? 0 : next;
        }
        nodes_[child].fail = fail;
        order.push_back(child);
      }
    }
  }

  // The node after reading `byte` in `node`; adds the links followed to `work`.
  int32_t Next(int32_t node, unsigned char byte, uint64_t& work) const {
    while (true) {
      ++work;
      const int32_t child = Child(node, byte);
      if (child != kNone) return child;
      if (node == 0) return 0;
      node = nodes_[node].fail;
    }
  }

  // The longest stop string that is a suffix of `node`'s text, or kNone.
  int32_t LongestStop(int32_t node) const {
    const Node& n = nodes_[node];
    return n.stop != kNone ? n.stop : (n.output == kNone ? kNone : nodes_[n.output].stop);
  }
  // The longest suffix of `node`'s text that is a proper prefix of a stop string: what must be held back.
  // Reading on from it gives the same nodes as from `node` (the nodes between have no children).
  int32_t Hold(int32_t node) const { return nodes_[node].hold; }
  int64_t Depth(int32_t node) const { return nodes_[node].depth; }
  const std::string& stop_string(int32_t index) const { return stop_strings_[index]; }

 private:
  struct Node {
    int32_t fail = 0;
    int32_t output = kNone;  // the nearest node on the failure chain that ends a stop string
    int32_t hold = 0;        // the nearest node on the failure chain (itself included) with children
    int32_t stop = kNone;    // the stop string this node ends
    int64_t depth = 0;
    uint32_t first_edge = 0;
    uint32_t num_edges = 0;
  };
  struct Edge {
    unsigned char byte;
    int32_t child;
  };

  int32_t Child(int32_t node, unsigned char byte) const {
    const auto begin = edges_.begin() + nodes_[node].first_edge;
    const auto end = begin + nodes_[node].num_edges;
    const auto it = std::lower_bound(begin, end, byte, [](const Edge& e, unsigned char b) { return e.byte < b; });
    return it != end && it->byte == byte ? it->child : kNone;
  }

  std::vector<std::string> stop_strings_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
};

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_string)
    : include_stop_string_(include_stop_string) {
  stop_strings.erase(std::remove(stop_strings.begin(), stop_strings.end(), std::string()), stop_strings.end());
  if (!stop_strings.empty()) automaton_ = std::make_shared<const Automaton>(std::move(stop_strings));
}

StopStringMatcher::Result StopStringMatcher::Add(absl::string_view text, bool may_stop) {
  Result result;
  if (stopped_) return result;
  if (automaton_ == nullptr) {
    result.text.assign(text.data(), text.size());
    return result;
  }
  const size_t fed = buffer_.size();
  buffer_.append(text.data(), text.size());
  work_ += text.size();
  for (size_t i = fed; i < buffer_.size(); ++i) {
    state_ = automaton_->Next(state_, static_cast<unsigned char>(buffer_[i]), work_);
    // Under min_tokens nothing may stop the stream: a completed stop string is text.
    if (!may_stop) continue;
    const int32_t stop = automaton_->LongestStop(state_);
    if (stop == Automaton::kNone) continue;
    // The first stop string to complete, as if the text had arrived byte by byte. It lies within the
    // unreleased text: the state never reaches back past it (see Hold).
    const std::string& matched = automaton_->stop_string(stop);
    const size_t end = i + 1;
    const size_t start = end - matched.size();
    result.text = buffer_.substr(released_, (include_stop_string_ ? end : start) - released_);
    result.stopped = stopped_ = true;
    result.matched = matched;
    buffer_.clear();
    released_ = 0;
    return result;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string; release the rest.
  state_ = automaton_->Hold(state_);
  const size_t keep = static_cast<size_t>(automaton_->Depth(state_));
  const size_t cut = buffer_.size() - keep;
  result.text = buffer_.substr(released_, cut - released_);
  released_ = cut;
  if (released_ > keep) {
    work_ += keep;
    buffer_.erase(0, released_);
    released_ = 0;
  }
  return result;
}

std::string StopStringMatcher::Finish() {
  if (stopped_) return {};
  std::string rest = buffer_.substr(released_);
  buffer_.clear();
  released_ = 0;
  state_ = 0;
  return rest;
}

}  // namespace llmc::tokenizer
