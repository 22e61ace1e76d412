#include "worker/tokenizer/tokenizer.h"

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace llmc::tokenizer {
namespace {

// Added tokens become their ids; the text between them goes through `encode_plain`.
template <typename EncodePlainFn>
void EncodeAroundAddedTokens(const AddedTokenMatcher& matcher, absl::string_view text, std::vector<int32_t>& ids,
                             EncodePlainFn encode_plain) {
  std::vector<TextSegment> segments;
  matcher.Split(text, segments);
  for (const auto& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      encode_plain(segment.text, ids);
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text, bool add_special_tokens) const {
  if (const auto bad = FindInvalidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 (byte offset ", *bad, ")"));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), template_prefix_.begin(), template_prefix_.end());
  EncodeAroundAddedTokens(*raw_added_, text, ids,
                          [this](absl::string_view plain, std::vector<int32_t>& out) { EncodePlain(plain, out); });
  if (add_special_tokens) ids.insert(ids.end(), template_suffix_.begin(), template_suffix_.end());
  return ids;
}

void Tokenizer::EncodePlain(absl::string_view text, std::vector<int32_t>& ids) const {
  const std::string normalized = normalizer_.Apply(text);
  if (normalized_added_->empty()) {
    EncodeNormalized(normalized, ids);
    return;
  }
  EncodeAroundAddedTokens(*normalized_added_, normalized, ids,
                          [this](absl::string_view plain, std::vector<int32_t>& out) { EncodeNormalized(plain, out); });
}

void Tokenizer::EncodeNormalized(absl::string_view text, std::vector<int32_t>& ids) const {
  std::string with_prefix;
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
    with_prefix = absl::StrCat(" ", text);
    text = with_prefix;
  }
  if (!split_) {
    model_->EncodeWord(text, ids);
    return;
  }
  std::vector<absl::string_view> pieces;
  split_->Split(text, pieces);
  for (absl::string_view piece : pieces) model_->EncodeWord(piece, ids);
}

absl::StatusOr<size_t> Tokenizer::CountTokens(absl::string_view text) const {
  auto ids = Encode(text);
  if (!ids.ok()) return ids.status();
  return ids->size();
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_bytes_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary (0..", id_to_bytes_.size() - 1, ")"));
    }
    if (skip_special_tokens && special_[id]) continue;
    bytes += id_to_bytes_[id];
  }
  return ReplaceInvalidUtf8(bytes);
}

absl::string_view Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_bytes_.size()) return {};
  return id_to_bytes_[id];
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

int32_t Tokenizer::TokenId(absl::string_view token) const {
  for (const auto& added : added_tokens_) {
    if (added.content == token) return added.id;
  }
  return model_->TokenId(token);
}

}  // namespace llmc::tokenizer
