#include "worker/tokenizer/tokenizer.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/utf8.h"

namespace llmc::tokenizer {
namespace {

// Added tokens become their ids; the text between them goes through `encode_plain(text, first, ids)`,
// where `first` says the text is the first section.
template <typename EncodePlainFn>
void EncodeAroundAddedTokens(const AddedTokenMatcher& matcher, absl::string_view text, bool first_section,
                             std::vector<int32_t>& ids, EncodePlainFn encode_plain) {
  std::vector<TextSegment> segments;
  matcher.Split(text, segments);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].token_id >= 0) {
      ids.push_back(segments[i].token_id);
    } else {
      encode_plain(segments[i].text, first_section && i == 0, ids);
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
  EncodeAroundAddedTokens(
      *raw_added_, text, /*first_section=*/true, ids,
      [this](absl::string_view plain, bool first, std::vector<int32_t>& out) { EncodePlain(plain, first, out); });
  if (add_special_tokens) ids.insert(ids.end(), template_suffix_.begin(), template_suffix_.end());
  return ids;
}

void Tokenizer::EncodePlain(absl::string_view text, bool first_section, std::vector<int32_t>& ids) const {
  const std::string normalized = normalizer_.Apply(text);
  if (normalized_added_->empty()) {
    EncodeNormalized(normalized, first_section, ids);
    return;
  }
  EncodeAroundAddedTokens(
      *normalized_added_, normalized, first_section, ids,
      [this](absl::string_view plain, bool first, std::vector<int32_t>& out) { EncodeNormalized(plain, first, out); });
}

void Tokenizer::EncodeNormalized(absl::string_view text, bool first_section, std::vector<int32_t>& ids) const {
  std::string rewritten;
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
    rewritten = absl::StrCat(" ", text);
    text = rewritten;
  }
  if (metaspace_.enabled) {
    const absl::string_view marker = metaspace_.replacement;
    rewritten = absl::StrReplaceAll(text, {{" ", marker}});
    const bool prepend = metaspace_.prepend == Metaspace::Prepend::kAlways ||
                         (metaspace_.prepend == Metaspace::Prepend::kFirst && first_section);
    if (prepend && !absl::StartsWith(rewritten, marker)) rewritten.insert(0, std::string(marker));
    text = rewritten;
    if (metaspace_.split) {
      // Each word starts at a marker (the text before the first one is a word too).
      size_t start = 0;
      while (start < text.size()) {
        size_t next = text.find(marker, start + (absl::StartsWith(text.substr(start), marker) ? marker.size() : 0));
        if (next == absl::string_view::npos) next = text.size();
        EncodePieces(text.substr(start, next - start), ids);
        start = next;
      }
      return;
    }
  }
  EncodePieces(text, ids);
}

void Tokenizer::EncodePieces(absl::string_view text, std::vector<int32_t>& ids) const {
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
    const absl::string_view token = id_to_bytes_.Get(id);
    bytes.append(token.data(), token.size());
  }
  size_t stripped = 0;
  while (stripped < strip_leading_spaces_ && stripped < bytes.size() && bytes[stripped] == ' ') ++stripped;
  bytes.erase(0, stripped);
  return ReplaceInvalidUtf8(bytes);
}

absl::string_view Tokenizer::TokenBytes(int32_t id) const { return id_to_bytes_.Get(id); }

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
