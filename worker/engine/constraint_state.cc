#include "worker/engine/constraint_state.h"

namespace llmc::engine {

ConstraintState::ConstraintState(const OutputConstraint& constraint, uint32_t num_choices) {
  matchers_.reserve(num_choices);
  for (uint32_t i = 0; i < num_choices; ++i) {
    matchers_.push_back(std::make_unique<grammar::GrammarMatcher>(constraint.grammar, constraint.vocabulary));
  }
}

void ConstraintState::FillMask(uint32_t choice_index, absl::Span<uint64_t> mask) {
  matchers_[choice_index]->FillMask(mask);
}

}  // namespace llmc::engine
