#include "worker/engine/row_masks.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "worker/engine/constraint_state.h"

namespace llmc::engine {

void RowMasks::Fill(const std::vector<Sequence*>& rows, const std::vector<std::vector<int32_t>>& suppressed,
                    int64_t vocab, std::vector<uint64_t>& words, std::vector<const uint64_t*>& masks) const {
  const size_t row_words = static_cast<size_t>((vocab + 63) / 64);
  size_t restricted = 0;
  for (const Sequence* sequence : rows) {
    restricted += sequence->group.constraint != nullptr || !sequence->group.request.sampling.allowed_token_mask.empty();
  }
  masks.assign(rows.size(), nullptr);
  if (restricted == 0) return;
  words.resize(restricted * row_words);
  size_t next = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const Sequence& sequence = *rows[k];
    const std::vector<uint64_t>& allowed = sequence.group.request.sampling.allowed_token_mask;
    ConstraintState* constraint = sequence.group.constraint.get();
    if (constraint == nullptr && allowed.empty()) continue;
    const absl::Span<uint64_t> mask = absl::MakeSpan(words).subspan(next++ * row_words, row_words);
    if (constraint != nullptr) {
      const absl::Time start = absl::Now();
      constraint->FillMask(sequence.choice_index, mask);
      if (observer_ != nullptr) observer_->OnGrammarMask(absl::Now() - start);
    } else {
      std::fill(mask.begin(), mask.end(), ~uint64_t{0});
    }
    if (!allowed.empty()) {
      for (size_t w = 0; w < row_words; ++w) mask[w] &= w < allowed.size() ? allowed[w] : 0;
    }
    for (const int32_t id : suppressed[k]) {
      if (id >= 0 && id < vocab) mask[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63));
    }
    if (vocab % 64 != 0) mask[row_words - 1] &= (uint64_t{1} << (vocab % 64)) - 1;
    masks[k] = mask.data();
  }
}

}  // namespace llmc::engine
