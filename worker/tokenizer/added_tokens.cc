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
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (const auto& token : tokens_) first_bytes_[static_cast<unsigned char>(token.content[0])] = true;
}

bool AddedTokenMatcher::MatchAt(absl::string_view text, size_t position, size_t* match_length,
                                const AddedToken** token) const {
  for (const auto& candidate : tokens_) {
    if (text.compare(position, candidate.content.size(), candidate.content) != 0) continue;
    const size_t end = position + candidate.content.size();
    if (candidate.single_word) {
      const bool word_before = position > 0 && IsWordByte(static_cast<unsigned char>(text[position - 1]));
      const bool word_after = end < text.size() && IsWordByte(static_cast<unsigned char>(text[end]));
      if (word_before || word_after) continue;
    }
    *match_length = candidate.content.size();
    *token = &candidate;
    return true;
  }
  return false;
}

void AddedTokenMatcher::Split(absl::string_view text, std::vector<TextSegment>& segments) const {
  size_t plain_start = 0;
  size_t position = 0;
  while (position < text.size()) {
    if (!first_bytes_[static_cast<unsigned char>(text[position])]) {
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
