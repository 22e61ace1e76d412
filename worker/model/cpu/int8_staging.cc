#include "worker/model/cpu/int8_staging.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "worker/model/cpu/cache_aligned.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {

namespace {
thread_local Int8Activations active_int8_activations = Int8Activations::kInt16;
}  // namespace

Int8Activations ActiveInt8Activations() { return active_int8_activations; }

ScopedInt8Activations::ScopedInt8Activations(Int8Activations activations) : previous_(active_int8_activations) {
  active_int8_activations = activations;
}

ScopedInt8Activations::~ScopedInt8Activations() { active_int8_activations = previous_; }

bool HasByteActivationKernel() {
#ifdef LLMC_CPU_X86_KERNELS
  return ActiveCpuIsa() >= CpuIsa::kAvx512Vnni;
#else
  return false;
#endif
}

Int8Activations Int8ActivationsForRows(int64_t rows) {
  if (active_int8_activations != Int8Activations::kByBatch) return active_int8_activations;
  // Elsewhere (AVX2, portable) int8 activations run through the int16 kernels: less exact, no faster.
  return rows >= kInt8ActivationMinRows && HasByteActivationKernel() ? Int8Activations::kInt8 : Int8Activations::kInt16;
}

Int8Activations Int4ActivationsForRows(int64_t rows) {
  // Without the byte kernel int8 activations would only lose precision.
  if (active_int8_activations == Int8Activations::kInt16 || !HasByteActivationKernel()) return Int8Activations::kInt16;
  if (active_int8_activations == Int8Activations::kInt8) return Int8Activations::kInt8;
  return rows >= kInt4ByteActivationMinRows ? Int8Activations::kInt8 : Int8Activations::kInt16;
}

int64_t ActivationGroupPairs(int64_t k, int64_t weight_groups, Int8Activations activations) {
  if (weight_groups > 1) return k / weight_groups / 2;
  if (activations != Int8Activations::kInt8) return 64;
  static_assert(kMaxInt8ActivationGroup % kAmxInt8StepInputs == 0, "split groups must stay whole tile steps");
  const int64_t whole_steps = (k + kAmxInt8StepInputs - 1) / kAmxInt8StepInputs * kAmxInt8StepInputs;
  return std::min(whole_steps, kMaxInt8ActivationGroup) / 2;
}

namespace {

void QuantizeActivationRowPortable(const float* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                                   int16_t levels, int16_t* dst, float* scales) {
  const float top = levels;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * group_size, end = std::min(k, begin + group_size);
    // The largest magnitude as the largest of the values' bits without the sign: for floats, the order of
    // those bits as integers is the order of the magnitudes, and Inf and NaN come above every finite value.
    // An integer reduction vectorizes; a float one (max, or a running sum to catch NaN) is a serial chain.
    uint32_t amax_bits = 0;
    for (int64_t i = begin; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, x + i, sizeof(bits));
      amax_bits = std::max(amax_bits, bits & 0x7fffffffu);
    }
    float amax;
    std::memcpy(&amax, &amax_bits, sizeof(amax));
    const float scale = amax / top;
    if (amax_bits >= 0x7f800000u) {  // Inf or NaN
      std::fill(dst + begin, dst + std::max(begin, end), int16_t{0});
      scales[g] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    scales[g] = scale;
    const float inverse = scale >= std::numeric_limits<float>::min() ? 1.0f / scale : 0.0f;
    // Round half to even by adding and subtracting 1.5 * 2^23 (|value| <= 32767): unlike nearbyint, which
    // the baseline ISA has no instruction for, this vectorizes.
    constexpr float kRounder = 12582912.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float rounded = (x[i] * inverse + kRounder) - kRounder;
      dst[i] = static_cast<int16_t>(std::min(top, std::max(-top, rounded)));
    }
  }
  std::fill(dst + std::min(k, stride), dst + stride, int16_t{0});
}

}  // namespace

void QuantizeActivationRow(const float* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                           int16_t levels, int16_t* dst, float* scales) {
#ifdef LLMC_CPU_X86_KERNELS
  if (ActiveCpuIsa() >= CpuIsa::kAvx512Vnni) {
    QuantizeActivationRowAvx512(x, k, stride, group_size, groups, levels, dst, scales);
    return;
  }
#endif
  QuantizeActivationRowPortable(x, k, stride, group_size, groups, levels, dst, scales);
}

void QuantizeActivationRow(const c10::BFloat16* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                           int16_t levels, int16_t* dst, float* scales) {
#ifdef LLMC_CPU_X86_KERNELS
  if (ActiveCpuIsa() >= CpuIsa::kAvx512Vnni) {
    QuantizeActivationRowBf16Avx512(reinterpret_cast<const uint16_t*>(x), k, stride, group_size, groups, levels, dst,
                                    scales);
    return;
  }
#endif
  thread_local std::vector<float> floats;
  floats.resize(k);
  for (int64_t i = 0; i < k; ++i) floats[i] = static_cast<float>(x[i]);
  QuantizeActivationRowPortable(floats.data(), k, stride, group_size, groups, levels, dst, scales);
}

void NarrowActivationRow(const int16_t* src, int64_t stride, int64_t group_size, int64_t groups, bool int4_byte_order,
                         int8_t* dst, int32_t* offsets) {
#ifdef LLMC_CPU_X86_KERNELS
  if (ActiveCpuIsa() >= CpuIsa::kAvx512Vnni) {
    NarrowActivationRowAvx512(src, stride, group_size, groups, int4_byte_order, dst, offsets);
    return;
  }
#endif
  // Input r of an octet goes to byte 2r (r < 4) or 2(r - 4) + 1.
  const auto position = [int4_byte_order](int64_t i) {
    if (!int4_byte_order) return i;
    const int64_t r = i % 8;
    return i - r + (r < 4 ? 2 * r : 2 * (r - 4) + 1);
  };
  for (int64_t i = 0; i < stride; ++i) dst[position(i)] = static_cast<int8_t>(src[i]);
  for (int64_t g = 0; g < groups; ++g) {
    int32_t sum = 0;
    for (int64_t i = g * group_size, end = std::min(stride, i + group_size); i < end; ++i) sum += src[i];
    offsets[g] = 128 * sum;
  }
}

const void* DequantizePanel(const int8_t* panel, const float* scales, int64_t weight_groups, int64_t k,
                            int64_t k_padded, at::ScalarType dtype) {
  const int64_t group_pairs = weight_groups == 1 ? k_padded / 2 : k / weight_groups / 2;
  if (dtype == at::kBFloat16) {
    thread_local CacheAlignedVector<uint16_t> halves;
    halves.resize(k_padded * kPanelWidth);  // grows once, to the widest panel
#ifdef LLMC_CPU_X86_KERNELS
    if (ActiveCpuIsa() >= CpuIsa::kAvx512Bf16) {
      DequantizePanelBf16Avx512(panel, scales, weight_groups, group_pairs, k_padded / 2, halves.data());
      return halves.data();
    }
#endif
    DequantizePanelBf16Portable(panel, scales, weight_groups, group_pairs, k_padded / 2, halves.data());
    return halves.data();
  }
  thread_local CacheAlignedVector<float> values;
  values.resize(k_padded * kPanelWidth);
  for (int64_t pair = 0; pair < k_padded / 2; ++pair) {
    const float* column_scales = scales + std::min(pair / group_pairs, weight_groups - 1) * kPanelWidth;
    const int8_t* src = panel + pair * kPanelWidth * 2;
    for (int64_t c = 0; c < kPanelWidth; ++c) {  // float32 panels are [k][64]
      values[(2 * pair) * kPanelWidth + c] = static_cast<float>(src[2 * c]) * column_scales[c];
      values[(2 * pair + 1) * kPanelWidth + c] = static_cast<float>(src[2 * c + 1]) * column_scales[c];
    }
  }
  return values.data();
}

}  // namespace llmc::model::cpu
