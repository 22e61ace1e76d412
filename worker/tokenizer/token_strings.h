#ifndef LLMC_WORKER_TOKENIZER_TOKEN_STRINGS_H_
#define LLMC_WORKER_TOKENIZER_TOKEN_STRINGS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace llmc::tokenizer {

// A vocabulary's byte strings by dense id, end to end in one buffer, optionally with a lookup by content.
// 150,000 tokens of a few bytes each take about 2 MB this way (3 MB with the lookup), against some 30 MB
// as a std::vector of std::string beside a hash map keyed by std::string (docs/tokenizer.md). Not copyable
// or movable: the lookup's hash and equality functors point at this object.
class TokenStrings {
 public:
  TokenStrings();
  TokenStrings(const TokenStrings&) = delete;
  TokenStrings& operator=(const TokenStrings&) = delete;

  // Replaces the contents with strings[id] for every id; with `indexed`, Find works as well. Fails (and
  // leaves the table empty) beyond 4 GiB of strings.
  absl::Status Assign(const std::vector<std::string>& strings, bool indexed);

  // One past the largest id.
  size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  // The string of `id`; empty outside 0..size()-1.
  absl::string_view Get(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= size()) return {};
    const size_t index = static_cast<size_t>(id);
    return absl::string_view(bytes_.data() + offsets_[index], offsets_[index + 1] - offsets_[index]);
  }
  // The lowest id whose string is `bytes`, or -1 (also for the empty string, and when not indexed).
  int32_t Find(absl::string_view bytes) const;

 private:
  // Hash and equality over ids that stand for their strings, and over strings looked up directly.
  struct Hash {
    using is_transparent = void;
    const TokenStrings* table;
    size_t operator()(absl::string_view bytes) const;
    size_t operator()(int32_t id) const { return (*this)(table->Get(id)); }
  };
  struct Equal {
    using is_transparent = void;
    const TokenStrings* table;
    bool operator()(int32_t a, int32_t b) const { return table->Get(a) == table->Get(b); }
    bool operator()(int32_t id, absl::string_view bytes) const { return table->Get(id) == bytes; }
    bool operator()(absl::string_view bytes, int32_t id) const { return table->Get(id) == bytes; }
  };

  std::string bytes_;
  std::vector<uint32_t> offsets_;  // size() + 1 entries
  absl::flat_hash_set<int32_t, Hash, Equal> index_;
};

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_TOKEN_STRINGS_H_
