// Plain C++ for any CPU; the compiler vectorizes the 64-column inner loops with the baseline ISA.
#include <algorithm>
#include <cstring>

#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/vector_math.h"

namespace llmc::model::cpu {
namespace {

inline float Bf16ToFloat(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

}  // namespace

void PanelBf16Portable(const PanelArgs& args) {
  const auto* panel = static_cast<const uint16_t*>(args.panel);
  for (int64_t m = 0; m < args.rows; ++m) {
    const auto* a = static_cast<const uint16_t*>(args.a) + m * args.a_stride;
    float acc[kPanelWidth] = {};
    for (int64_t pair = 0; pair < args.k_padded / 2; ++pair) {
      const float a0 = Bf16ToFloat(a[2 * pair]), a1 = Bf16ToFloat(a[2 * pair + 1]);
      const uint16_t* w = panel + pair * kPanelWidth * 2;
      for (int64_t c = 0; c < kPanelWidth; ++c) acc[c] += a0 * Bf16ToFloat(w[2 * c]) + a1 * Bf16ToFloat(w[2 * c + 1]);
    }
    std::memcpy(args.out + m * args.out_stride, acc, sizeof(acc));
  }
}

void PanelFloatPortable(const PanelArgs& args) {
  const auto* panel = static_cast<const float*>(args.panel);
  for (int64_t m = 0; m < args.rows; ++m) {
    const auto* a = static_cast<const float*>(args.a) + m * args.a_stride;
    float acc[kPanelWidth] = {};
    for (int64_t k = 0; k < args.k_padded; ++k) {
      const float x = a[k];
      const float* w = panel + k * kPanelWidth;
      for (int64_t c = 0; c < kPanelWidth; ++c) acc[c] += x * w[c];
    }
    std::memcpy(args.out + m * args.out_stride, acc, sizeof(acc));
  }
}

void DequantizePanelBf16Portable(const int8_t* panel, const float* scales, int64_t weight_groups, int64_t group_pairs,
                                 int64_t pairs, uint16_t* out) {
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const float* column_scales = scales + std::min(pair / group_pairs, weight_groups - 1) * kPanelWidth;
    for (int64_t i = 0; i < 2 * kPanelWidth; ++i) {
      out[pair * 2 * kPanelWidth + i] =
          attention_detail::FloatToBf16(static_cast<float>(panel[pair * 2 * kPanelWidth + i]) * column_scales[i / 2]);
    }
  }
}

void PanelInt8Portable(const Int8PanelArgs& args) {
  const int64_t pairs = args.k_padded / 2;
  for (int64_t m = 0; m < args.rows; ++m) {
    const int16_t* a = args.a + m * args.a_stride;
    float total[kPanelWidth] = {};
    for (int64_t g = 0; g < args.groups; ++g) {
      int32_t sum[kPanelWidth] = {};
      const int64_t last = std::min(pairs, (g + 1) * args.group_pairs);
      for (int64_t pair = g * args.group_pairs; pair < last; ++pair) {
        const int32_t a0 = a[2 * pair], a1 = a[2 * pair + 1];
        const int8_t* w = args.panel + pair * kPanelWidth * 2;
        for (int64_t c = 0; c < kPanelWidth; ++c) sum[c] += a0 * w[2 * c] + a1 * w[2 * c + 1];
      }
      const float a_scale = args.a_scales[m * args.groups + g];
      const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
      for (int64_t c = 0; c < kPanelWidth; ++c) total[c] += static_cast<float>(sum[c]) * (w_scales[c] * a_scale);
    }
    std::memcpy(args.out + m * args.out_stride, total, sizeof(total));
  }
}

void AttendPortable(const AttentionArgs& args) { Attend(args); }
void RoundRowToBf16Portable(const float* src, uint16_t* dst, int64_t count) { RoundRowToBf16(src, dst, count); }
void AddRowToBf16Portable(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count) {
  AddRowToBf16(residual, values, dst, count);
}
void SiluMulPortable(const float* gate, const float* up, float* out, int64_t count) { SiluMul(gate, up, out, count); }
void GeluTanhMulPortable(const float* gate, const float* up, float* out, int64_t count) {
  GeluTanhMul(gate, up, out, count);
}

}  // namespace llmc::model::cpu
