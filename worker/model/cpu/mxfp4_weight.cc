#include "worker/model/cpu/mxfp4_weight.h"

#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "worker/model/cpu/cache_aligned.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

// 2 * E2M1 by code: the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled, then their negatives.
constexpr int8_t kDoubledByCode[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace

const int8_t kMxfp4DoubledValues[16] = {kDoubledByCode[8],  kDoubledByCode[9],  kDoubledByCode[10], kDoubledByCode[11],
                                        kDoubledByCode[12], kDoubledByCode[13], kDoubledByCode[14], kDoubledByCode[15],
                                        kDoubledByCode[0],  kDoubledByCode[1],  kDoubledByCode[2],  kDoubledByCode[3],
                                        kDoubledByCode[4],  kDoubledByCode[5],  kDoubledByCode[6],  kDoubledByCode[7]};

float Mxfp4HalfScale(uint8_t exponent) { return std::ldexp(1.0f, static_cast<int>(exponent) - 128); }

at::Tensor PackMxfp4Scales(const at::Tensor& exponents, const std::vector<int64_t>& column_order) {
  TORCH_CHECK(exponents.dim() == 2 && exponents.scalar_type() == at::kByte,
              "PackMxfp4Scales: needs uint8 exponents [N, groups]");
  return PackColumnGroups(exponents, column_order);
}

bool IsPackedMxfp4Scales(const at::Tensor& scales, const at::Tensor& packed) {
  return IsMxfp4Scales(scales) && scales.dim() == 3 && scales.size(0) == packed.size(0) &&
         scales.size(2) == kPanelWidth && scales.is_contiguous();
}

const void* DequantizeMxfp4Panel(const uint8_t* panel, const uint8_t* exponents, int64_t weight_groups,
                                 int64_t k_padded, at::ScalarType dtype) {
  thread_local CacheAlignedVector<float> values;
  thread_local CacheAlignedVector<c10::BFloat16> halves;
  const bool bf16 = dtype == at::kBFloat16;
  if (bf16) {
    halves.resize(k_padded * kPanelWidth);
  } else {
    values.resize(k_padded * kPanelWidth);
  }
  constexpr int64_t kGroupOctets = kMxfp4GroupSize / 8;
  for (int64_t o = 0; o < k_padded / 8; ++o) {
    const uint8_t* column_exponents = exponents + std::min(o / kGroupOctets, weight_groups - 1) * kPanelWidth;
    for (int64_t c = 0; c < kPanelWidth; ++c) {
      uint32_t word;
      std::memcpy(&word, panel + (o * kPanelWidth + c) * 4, sizeof(word));
      const float scale = Mxfp4HalfScale(column_exponents[c]);
      for (int64_t r = 0; r < 8; ++r) {
        const float value =
            static_cast<float>(kMxfp4DoubledValues[(word >> (4 * Int4NibblePosition(r))) & 0xFu]) * scale;
        const int64_t kk = 8 * o + r;
        if (bf16) {
          halves[((kk / 2) * kPanelWidth + c) * 2 + kk % 2] = c10::BFloat16(value);  // [k pairs][64][2]
        } else {
          values[kk * kPanelWidth + c] = value;  // float32 panels are [k][64]
        }
      }
    }
  }
  if (bf16) return halves.data();
  return values.data();
}

at::Tensor DequantizeMxfp4(const at::Tensor& codes, const at::Tensor& exponents) {
  TORCH_CHECK(codes.dim() == 2 && exponents.dim() == 2 && codes.scalar_type() == at::kByte &&
                  exponents.scalar_type() == at::kByte && exponents.size(0) == codes.size(0) &&
                  2 * codes.size(1) == exponents.size(1) * kMxfp4GroupSize,
              "MXFP4 weight [N, K / 2] needs uint8 exponents [N, K / 32]");
  // E2M1 by code: half the doubled table, exactly.
  const at::Tensor table =
      at::from_blob(const_cast<int8_t*>(kDoubledByCode), {16}, at::kChar).to(codes.device(), at::kFloat) * 0.5;
  const at::Tensor bytes = codes.to(at::kLong);
  const at::Tensor nibbles =
      at::stack({at::bitwise_and(bytes, 15), at::floor_divide(bytes, 16)}, 2).reshape({codes.size(0), -1});
  const at::Tensor scale = at::exp2(exponents.to(at::kFloat) - 127.0).repeat_interleave(kMxfp4GroupSize, 1);
  return table.index({nibbles}) * scale;
}

}  // namespace llmc::model::cpu
