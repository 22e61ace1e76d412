#include "worker/grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "worker/grammar/token_masks.h"

namespace llmc::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               std::shared_ptr<const VocabularyIndex> vocabulary)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      arena_(std::make_unique<StackArena>(*grammar_)) {
  history_.push_back(Position{arena_->Start(), false});
}

bool GrammarMatcher::AcceptBytes(absl::string_view bytes) {
  const Position& current = history_.back();
  if (current.ended) return false;
  scratch_ = current.set;
  for (const char c : bytes) {
    arena_->Advance(scratch_, static_cast<uint8_t>(c), scratch2_);
    if (scratch2_.dead()) return false;
    std::swap(scratch_, scratch2_);
  }
  history_.push_back(Position{scratch_, false});
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t token_id) {
  if (vocabulary_ == nullptr || history_.back().ended) return false;
  if (vocabulary_->IsEndToken(token_id)) {
    if (!history_.back().set.can_end) return false;
    history_.push_back(Position{StackSet{}, true});
    return true;
  }
  if (!vocabulary_->IsIndexed(token_id)) return false;
  return AcceptBytes(vocabulary_->TokenBytes(token_id));
}

void GrammarMatcher::Rollback(int32_t steps) {
  steps = std::clamp(steps, 0, num_steps());
  history_.resize(history_.size() - static_cast<size_t>(steps));
}

bool GrammarMatcher::CanEnd() const { return !history_.back().ended && history_.back().set.can_end; }

bool GrammarMatcher::IsTerminated() const { return history_.back().ended || history_.back().set.stacks.empty(); }

std::bitset<256> GrammarMatcher::AllowedNextBytes() const {
  if (history_.back().ended) return {};
  return arena_->AllowedBytes(history_.back().set);
}

void GrammarMatcher::FillMask(absl::Span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  const Position& current = history_.back();
  if (vocabulary_ == nullptr || current.ended) return;
  MaskCache& cache = grammar_->mask_cache();
  for (const int32_t stack : current.set.stacks) {
    arena_->Contents(stack, contents_);
    std::shared_ptr<const TokenBits> bits = cache.FindStack(*vocabulary_, contents_);
    if (bits == nullptr) {
      bits = std::make_shared<const TokenBits>(ComputeStackMask(*arena_, stack, *vocabulary_, cache));
      cache.StoreStack(*vocabulary_, contents_, bits);
    }
    const size_t words = std::min(mask.size(), bits->size());
    for (size_t w = 0; w < words; ++w) mask[w] |= (*bits)[w];
  }
  if (current.set.can_end) {
    for (const int32_t token : vocabulary_->end_tokens()) {
      if (static_cast<size_t>(token) < mask.size() * 64) mask[token >> 6] |= uint64_t{1} << (token & 63);
    }
  }
}

absl::StatusOr<bool> MatchesText(const Grammar& grammar, absl::string_view text) {
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(grammar);
  if (!compiled.ok()) return compiled.status();
  GrammarMatcher matcher(*compiled, nullptr);
  return matcher.AcceptBytes(text) && matcher.CanEnd();
}

}  // namespace llmc::grammar
