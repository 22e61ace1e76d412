// The int4 panel kernel and panel dequantization in plain C++ (panel_kernels.h has the layout): the reference
// every vectorized path matches, sum for sum.
#include <algorithm>
#include <cstring>

#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

// The signed 4-bit value at bits 4 * position of `word`.
inline int32_t Nibble(uint32_t word, int position) {
  const int32_t value = static_cast<int32_t>((word >> (4 * position)) & 0xFu);
  return (value ^ 8) - 8;
}

inline uint16_t RoundToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

void PanelInt4Portable(const Int8PanelArgs& args) {
  const auto* panel = reinterpret_cast<const uint8_t*>(args.panel);
  const int64_t octets = args.k_padded / 8, group_octets = args.group_pairs / 4;
  for (int64_t m = 0; m < args.rows; ++m) {
    const int16_t* a = args.a + m * args.a_stride;
    float* out = args.out + m * args.out_stride;
    for (int64_t g = 0; g < args.groups; ++g) {
      int32_t sums[kPanelWidth] = {};
      const int64_t last = std::min(octets, (g + 1) * group_octets);
      for (int64_t o = g * group_octets; o < last; ++o) {
        const uint8_t* w = panel + o * kPanelWidth * 4;
        const int16_t* x = a + 8 * o;
        for (int64_t c = 0; c < kPanelWidth; ++c) {
          uint32_t word;
          std::memcpy(&word, w + 4 * c, sizeof(word));
          int32_t sum = 0;
          for (int j = 0; j < 4; ++j) sum += x[2 * j] * Nibble(word, j) + x[2 * j + 1] * Nibble(word, 4 + j);
          sums[c] += sum;
        }
      }
      const float a_scale = args.a_scales[m * args.groups + g];
      const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
      for (int64_t c = 0; c < kPanelWidth; ++c) {
        const float value = static_cast<float>(sums[c]) * (w_scales[c] * a_scale);
        out[c] = g == 0 ? value : out[c] + value;
      }
    }
  }
}

void DequantizeInt4PanelBf16Portable(const uint8_t* panel, const float* scales, const float* zero_offsets,
                                     int64_t weight_groups, int64_t group_pairs, int64_t pairs, uint16_t* out) {
  for (int64_t o = 0; o < pairs / 4; ++o) {
    const int64_t group_at = std::min(o * 4 / group_pairs, weight_groups - 1) * kPanelWidth;
    const uint8_t* w = panel + o * kPanelWidth * 4;
    for (int64_t c = 0; c < kPanelWidth; ++c) {
      uint32_t word;
      std::memcpy(&word, w + 4 * c, sizeof(word));
      const float scale = scales[group_at + c];
      const float offset = zero_offsets == nullptr ? 0.0f : zero_offsets[group_at + c];
      for (int j = 0; j < 4; ++j) {
        uint16_t* dst = out + ((4 * o + j) * kPanelWidth + c) * 2;
        dst[0] = RoundToBf16((static_cast<float>(Nibble(word, j)) + offset) * scale);
        dst[1] = RoundToBf16((static_cast<float>(Nibble(word, 4 + j)) + offset) * scale);
      }
    }
  }
}

void SumInt4NibblesPortable(const double* x, int64_t count, double inverse, double* sums) {
  double xq[4] = {0.0, 0.0, 0.0, 0.0}, qq[4] = {0.0, 0.0, 0.0, 0.0};
  for (int64_t i = 0; i < count; i += 4) {
    for (int64_t j = 0; j < 4; ++j) {
      const double q = Int4Nibble(x[i + j], inverse);
      xq[j] += x[i + j] * q;
      qq[j] += q * q;
    }
  }
  sums[0] = (xq[0] + xq[1]) + (xq[2] + xq[3]);
  sums[1] = (qq[0] + qq[1]) + (qq[2] + qq[3]);
}

}  // namespace llmc::model::cpu
