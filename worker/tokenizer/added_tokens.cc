#include "worker/tokenizer/added_tokens.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace llmc::tokenizer {
namespace {

bool IsWordByte(unsigned char c) { return absl::ascii_isalnum(c) || c == '_' || c >= 0x80; }
bool IsSpaceByte(unsigned char c) { return absl::ascii_isspace(c); }

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  tokens_.erase(std::remove_if(tokens_.begin(), tokens_.end(), [](const AddedToken& t) { return t.content.empty(); }),
                tokens_.end());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i].content;
    index_by_content_.try_emplace(content, i);
    std::vector<size_t>& lengths = lengths_by_first_byte_[static_cast<unsigned char>(content[0])];
    if (std::find(lengths.begin(), lengths.end(), content.size()) == lengths.end()) lengths.push_back(content.size());
  }
  for (auto& lengths : lengths_by_first_byte_) std::sort(lengths.rbegin(), lengths.rend());
}

bool AddedTokenMatcher::MatchAt(absl::string_view text, size_t position, size_t* match_length,
                                const AddedToken** token) const {
  for (const size_t length : lengths_by_first_byte_[static_cast<unsigned char>(text[position])]) {
    if (length > text.size() - position) continue;
    const auto found = index_by_content_.find(text.substr(position, length));
    if (found == index_by_content_.end()) continue;
    const AddedToken& candidate = tokens_[found->second];
    const size_t end = position + length;
    if (candidate.single_word) {
      const bool word_before = position > 0 && IsWordByte(static_cast<unsigned char>(text[position - 1]));
      const bool word_after = end < text.size() && IsWordByte(static_cast<unsigned char>(text[end]));
      if (word_before || word_after) continue;
    }
    *match_length = length;
    *token = &candidate;
    return true;
  }
  return false;
}

void AddedTokenMatcher::Split(absl::string_view text, std::vector<TextSegment>& segments) const {
  size_t plain_start = 0;
  size_t position = 0;
  while (position < text.size()) {
    if (lengths_by_first_byte_[static_cast<unsigned char>(text[position])].empty()) {
      ++position;
      continue;
    }
    size_t length = 0;
    const AddedToken* token = nullptr;
    if (!MatchAt(text, position, &length, &token)) {
      ++position;
      continue;
    }
    size_t start = position, end = position + length;
    if (token->lstrip) {
      while (start > plain_start && IsSpaceByte(static_cast<unsigned char>(text[start - 1]))) --start;
    }
    if (token->rstrip) {
      while (end < text.size() && IsSpaceByte(static_cast<unsigned char>(text[end]))) ++end;
    }
    if (start > plain_start) segments.push_back({text.substr(plain_start, start - plain_start), -1});
    segments.push_back({text.substr(start, end - start), token->id});
    plain_start = position = end;
  }
  if (plain_start < text.size()) segments.push_back({text.substr(plain_start), -1});
}

}  // namespace llmc::tokenizer
