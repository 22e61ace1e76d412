#ifndef LLMC_WORKER_ENGINE_ROW_MASKS_H_
#define LLMC_WORKER_ENGINE_ROW_MASKS_H_

#include <cstdint>
#include <vector>

#include "worker/engine/engine_observer.h"
#include "worker/engine/sequence.h"

namespace llmc::engine {

// The allowed-token masks of one step's sampling rows (a structured-output grammar, allowed_token_ids), filled
// before the forward pass: the LM head then keeps the top logits of allowed tokens only, so a masked greedy or
// top-k row needs no full logits row (model/cpu/logit_masks.h). Engine thread only.
class RowMasks {
 public:
  explicit RowMasks(EngineObserver* observer) : observer_(observer) {}

  // masks[k]: row k's mask over `vocab` ids (one bit per id, set: allowed, with the row's suppressed ids
  // cleared), or null for an unrestricted row. The masks live in `words` until its next resize.
  void Fill(const std::vector<Sequence*>& rows, const std::vector<std::vector<int32_t>>& suppressed, int64_t vocab,
            std::vector<uint64_t>& words, std::vector<const uint64_t*>& masks) const;

 private:
  EngineObserver* const observer_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_ROW_MASKS_H_
