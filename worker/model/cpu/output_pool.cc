#include "worker/model/cpu/output_pool.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/accumulate.h>

#include <array>
#include <atomic>

namespace llmc::model::cpu {
namespace {

// Decode batches' outputs, not prefills': a pool never keeps more than a few of these alive.
constexpr int64_t kMaxRecycledBytes = 256 * 1024;
// Outputs of one slot alive at once: a layer's output stays alive as the next layer's residual.
constexpr int kTensorsPerSlot = 4;

std::atomic<bool> recycling_enabled{true};

// Held by the pool alone: no other tensor, and no view of its storage.
bool Unshared(const at::Tensor& tensor) { return tensor.use_count() == 1 && tensor.storage().use_count() == 1; }

}  // namespace

at::Tensor RecycledEmpty(OutputSlot slot, at::IntArrayRef sizes, at::ScalarType dtype) {
  const int64_t bytes = c10::multiply_integers(sizes) * static_cast<int64_t>(c10::elementSize(dtype));
  // Outside InferenceMode a recycled inference tensor could meet autograd; those callers are tests and tools.
  if (bytes > kMaxRecycledBytes || !c10::InferenceMode::is_enabled() ||
      !recycling_enabled.load(std::memory_order_relaxed)) {
    return at::empty(sizes, at::TensorOptions().dtype(dtype));
  }
  thread_local std::array<std::array<at::Tensor, kTensorsPerSlot>, kOutputSlots> pools;
  std::array<at::Tensor, kTensorsPerSlot>& pool = pools[slot];
  at::Tensor* free_entry = nullptr;
  for (at::Tensor& kept : pool) {
    if (!kept.defined()) {
      free_entry = &kept;
      continue;
    }
    if (!Unshared(kept)) continue;
    if (kept.scalar_type() == dtype && kept.sizes() == sizes && kept.is_contiguous()) return kept;
    free_entry = &kept;
  }
  at::Tensor fresh = at::empty(sizes, at::TensorOptions().dtype(dtype));
  if (free_entry != nullptr) *free_entry = fresh;
  return fresh;
}

void SetOutputRecyclingEnabled(bool enabled) { recycling_enabled.store(enabled, std::memory_order_relaxed); }

}  // namespace llmc::model::cpu
