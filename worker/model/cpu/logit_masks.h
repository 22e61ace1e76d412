#ifndef LLMC_WORKER_MODEL_CPU_LOGIT_MASKS_H_
#define LLMC_WORKER_MODEL_CPU_LOGIT_MASKS_H_

#include <cstdint>
#include <vector>

namespace llmc::model::cpu {

// Allowed-token masks for the LM head's in-pass top logits (structured outputs): masks[r] is logits row r's
// (one bit per token id, set: allowed) or null for a row without one. The TorchScript graph has no argument
// for them, so the thread that runs the forward pass sets them for its duration and the operator reads them
// on entry, on that thread (as ScopedInt8Activations does). A masked row's top logits are those of its allowed
// tokens only; its full logits row, if it has one, stays raw.
class ScopedLogitMasks {
 public:
  explicit ScopedLogitMasks(const std::vector<const uint64_t*>* masks);
  ~ScopedLogitMasks();
  ScopedLogitMasks(const ScopedLogitMasks&) = delete;
  ScopedLogitMasks& operator=(const ScopedLogitMasks&) = delete;

 private:
  const std::vector<const uint64_t*>* previous_;
};

// The calling thread's masks, or null.
const std::vector<const uint64_t*>* CurrentLogitMasks();

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_LOGIT_MASKS_H_
