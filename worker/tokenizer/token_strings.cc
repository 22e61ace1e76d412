#include "worker/tokenizer/token_strings.h"

#include "absl/hash/hash.h"

namespace llmc::tokenizer {

TokenStrings::TokenStrings() : index_(0, Hash{this}, Equal{this}) {}

void TokenStrings::Assign(const std::vector<std::string>& strings, bool indexed) {
  size_t total = 0;
  for (const std::string& s : strings) total += s.size();
  bytes_.clear();
  bytes_.reserve(total);
  offsets_.clear();
  offsets_.reserve(strings.size() + 1);
  offsets_.push_back(0);
  for (const std::string& s : strings) {
    bytes_ += s;
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  bytes_.shrink_to_fit();
  index_.clear();
  if (!indexed) return;
  index_.reserve(strings.size());
  for (size_t id = 0; id < strings.size(); ++id) {
    if (!strings[id].empty()) index_.insert(static_cast<int32_t>(id));  // keeps the lowest id of equal strings
  }
}

int32_t TokenStrings::Find(absl::string_view bytes) const {
  if (bytes.empty()) return -1;
  const auto it = index_.find(bytes);
  return it == index_.end() ? -1 : *it;
}

size_t TokenStrings::Hash::operator()(absl::string_view bytes) const { return absl::Hash<absl::string_view>()(bytes); }

}  // namespace llmc::tokenizer
