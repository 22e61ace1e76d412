#ifndef LLMC_WORKER_ENGINE_CONSTRAINT_STATE_H_
#define LLMC_WORKER_ENGINE_CONSTRAINT_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "worker/engine/generation.h"
#include "worker/grammar/matcher.h"

namespace llmc::engine {

// A structured-output request's state beside its choices: one grammar matcher per choice, advanced by each
// token the choice appends (output_processor.h) and asked for the allowed tokens before each draw
// (sample_action.h). Engine thread only.
class ConstraintState {
 public:
  ConstraintState(const OutputConstraint& constraint, uint32_t num_choices);

  grammar::GrammarMatcher& matcher(uint32_t choice_index) { return *matchers_[choice_index]; }
  const grammar::GrammarMatcher& matcher(uint32_t choice_index) const { return *matchers_[choice_index]; }
  // Fills `mask` (one bit per token id over the logits' width) with the tokens choice `choice_index` may draw.
  void FillMask(uint32_t choice_index, absl::Span<uint64_t> mask);

 private:
  std::vector<std::unique_ptr<grammar::GrammarMatcher>> matchers_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_CONSTRAINT_STATE_H_
