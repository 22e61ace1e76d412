#include "worker/model/cpu/int4_requantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

struct Verdict {
  c10::weak_intrusive_ptr<c10::StorageImpl> memory;  // the scales' storage, so that a freed weight is not mistaken
  int64_t numel;                                     // and a view of another extent neither
  bool requantizes;
};
// Verdicts on weights long freed (models unloaded) are forgotten wholesale past this many.
constexpr size_t kMaxRemembered = 1 << 14;

std::mutex& VerdictsMutex() {
  static std::mutex mutex;
  return mutex;
}
std::unordered_map<const void*, Verdict>& Verdicts() {
  static auto* verdicts = new std::unordered_map<const void*, Verdict>();
  return *verdicts;
}

bool ScanRequantizes(const PanelWeight& weight) {
  const at::Tensor scales = weight.scales.contiguous();
  const float steps = weight.zero_offsets.defined() ? kInt4RequantizeZeroPointSteps : kInt4RequantizeSymmetricSteps;
  const int64_t panels = scales.size(0), groups = scales.size(1);
  const float* all = scales.data_ptr<float>();
  for (int64_t p = 0; p < panels; ++p) {
    const float* panel = all + p * groups * kPanelWidth;
    for (int64_t c = 0; c < kPanelWidth; ++c) {
      float largest = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = panel[g * kPanelWidth + c];
        if (!std::isfinite(scale) || scale < 0.0f) return false;
        largest = std::max(largest, scale);
      }
      if (largest == 0.0f) continue;
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = panel[g * kPanelWidth + c];
        if (scale != 0.0f && (scale * steps) / largest < kMinInt4RequantizedStep) return false;
      }
    }
  }
  return true;
}

}  // namespace

bool RequantizesLargeInt4Batches() {
#ifdef LLMC_CPU_X86_KERNELS
  static const bool has_vbmi = __builtin_cpu_supports("avx512vbmi");
  return HasAmxInt8() || (ActiveCpuIsa() == CpuIsa::kAvx512Vnni && has_vbmi);
#else
  return false;
#endif
}

int64_t Int4RequantizedMinRows() {
  return HasAmxInt8() ? kInt4RequantizedMinRowsOnTiles : kInt4RequantizedMinRowsAvx512;
}

bool Int4RequantizesToInt8(const PanelWeight& weight) {
  const void* key = weight.scales.data_ptr();
  c10::StorageImpl* storage = weight.scales.storage().unsafeGetStorageImpl();
  {
    const std::lock_guard<std::mutex> lock(VerdictsMutex());
    const auto known = Verdicts().find(key);
    if (known != Verdicts().end() && known->second.numel == weight.scales.numel() &&
        known->second.memory.lock().get() == storage) {
      return known->second.requantizes;
    }
  }
  const bool requantizes = ScanRequantizes(weight);
  const std::lock_guard<std::mutex> lock(VerdictsMutex());
  if (Verdicts().size() >= kMaxRemembered) Verdicts().clear();
  Verdicts().insert_or_assign(
      key, Verdict{weight.scales.storage().getWeakStorageImpl(), weight.scales.numel(), requantizes});
  return requantizes;
}

void Int4RequantizeFactors(const float* scales, const float* zero_offsets, int64_t weight_groups, float* factors,
                           int32_t* offsets, float* column_scales) {
  const float steps = zero_offsets != nullptr ? kInt4RequantizeZeroPointSteps : kInt4RequantizeSymmetricSteps;
  for (int64_t c = 0; c < kPanelWidth; ++c) {
    float largest = 0.0f;
    for (int64_t g = 0; g < weight_groups; ++g) largest = std::max(largest, scales[g * kPanelWidth + c]);
    column_scales[c] = largest / steps;
    for (int64_t g = 0; g < weight_groups; ++g) {
      const int64_t at = g * kPanelWidth + c;
      factors[at] = largest == 0.0f ? 0.0f : (scales[at] * steps) / largest;
      offsets[at] = zero_offsets == nullptr ? 0 : static_cast<int32_t>(zero_offsets[at]);
    }
  }
}

void RequantizeInt4PanelPortable(const uint8_t* panel, const float* factors, const int32_t* offsets,
                                 int64_t weight_groups, int64_t group_pairs, int64_t k_padded, int8_t* values) {
  for (int64_t k = 0; k < k_padded; ++k) {
    const int64_t octet = k / 8, group = std::min(k / 2 / group_pairs, weight_groups - 1);
    const int shift = 4 * Int4NibblePosition(k % 8);
    for (int64_t c = 0; c < kPanelWidth; ++c) {
      uint32_t word;
      std::memcpy(&word, panel + (octet * kPanelWidth + c) * 4, sizeof(word));
      const int32_t q = static_cast<int32_t>(((word >> shift) & 0xfu) ^ 8u) - 8;
      const int64_t at = group * kPanelWidth + c;
      values[k * kPanelWidth + c] =
          static_cast<int8_t>(std::nearbyint(static_cast<float>(q + offsets[at]) * factors[at]));
    }
  }
}

}  // namespace llmc::model::cpu
