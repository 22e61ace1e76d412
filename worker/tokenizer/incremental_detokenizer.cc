#include "worker/tokenizer/incremental_detokenizer.h"

#include <algorithm>

#include "common/utf8.h"

namespace llmc::tokenizer {

std::string IncrementalDetokenizer::Add(int32_t token_id) {
  if (skip_special_tokens_ && tokenizer_.IsSpecial(token_id) &&
      !std::binary_search(kept_special_tokens_.begin(), kept_special_tokens_.end(), token_id)) {
    return {};
  }
  const absl::string_view bytes = tokenizer_.TokenBytes(token_id);
  pending_.append(bytes.data(), bytes.size());
  std::string text;
  size_t position = 0;
  while (position < pending_.size()) {
    const Utf8Sequence sequence = ReadUtf8Sequence(pending_, position);
    if (sequence.kind == Utf8Sequence::Kind::kIncomplete) break;
    if (sequence.kind == Utf8Sequence::Kind::kValid) {
      text.append(pending_, position, sequence.length);
    } else {
      text += "\xEF\xBF\xBD";
    }
    position += sequence.length;
  }
  pending_.erase(0, position);
  return text;
}

std::string IncrementalDetokenizer::Finish() {
  std::string text = ReplaceInvalidUtf8(pending_);
  pending_.clear();
  return text;
}

}  // namespace llmc::tokenizer
