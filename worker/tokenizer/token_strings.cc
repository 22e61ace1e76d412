#include "worker/tokenizer/token_strings.h"

#include <limits>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace llmc::tokenizer {

TokenStrings::TokenStrings() : index_(0, Hash{this}, Equal{this}) {}

absl::Status TokenStrings::Assign(const std::vector<std::string>& strings, bool indexed) {
  size_t total = 0;
  for (const std::string& s : strings) total += s.size();
  bytes_.clear();
  offsets_.clear();
  index_.clear();
  if (total > std::numeric_limits<uint32_t>::max() || strings.size() > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("a vocabulary of ", strings.size(), " tokens and ", total,
                                                   " bytes is beyond what the tokenizer holds (4 GiB)"));
  }
  bytes_.reserve(total);
  offsets_.reserve(strings.size() + 1);
  offsets_.push_back(0);
  for (const std::string& s : strings) {
    bytes_ += s;
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  bytes_.shrink_to_fit();
  if (!indexed) return absl::OkStatus();
  index_.reserve(strings.size());
  for (size_t id = 0; id < strings.size(); ++id) {
    if (!strings[id].empty()) index_.insert(static_cast<int32_t>(id));  // the lowest id of equal strings stays
  }
  return absl::OkStatus();
}

int32_t TokenStrings::Find(absl::string_view bytes) const {
  if (bytes.empty()) return -1;
  const auto it = index_.find(bytes);
  return it == index_.end() ? -1 : *it;
}

size_t TokenStrings::Hash::operator()(absl::string_view bytes) const { return absl::Hash<absl::string_view>()(bytes); }

}  // namespace llmc::tokenizer
