#include "worker/model/cpu/int4_weight.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "worker/model/cpu/cache_aligned.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

constexpr int64_t kOctetBytes = kPanelWidth * 4;

// The exporter's search (tools/llmc_export/quantize.py, INT4_SCALE_DIVISORS): the plain candidate, then for each
// divisor d the rounding at amax / d with the float32 scale that fits it best; the candidate whose squared error
// is least (the first on a tie).
constexpr double kInt4ScaleDivisors[] = {6.5, 7.0, 7.5, 8.0, 8.5, 9.0, 9.5, 10.0};

// sum(x q) and sum(q^2) of a group's nibbles rounded at `rounding`. Every product is exact in double, and so
// are the sums in any order (a nonzero q needs |x| >= rounding / 2: the terms span a few binades of 28-bit
// products), so every instruction-set path gives the exporter's torch sums bit for bit.
struct NibbleSums {
  double xq = 0.0, qq = 0.0;
};

NibbleSums SumNibbles(const double* x, int64_t count, double rounding) {
  const double inverse = 1.0 / rounding;
  double sums[2];
#ifdef LLMC_CPU_X86_KERNELS
  if (ActiveCpuIsa() >= CpuIsa::kAvx512Vnni) {
    SumInt4NibblesAvx512(x, count, inverse, sums);
    return {sums[0], sums[1]};
  }
  if (ActiveCpuIsa() >= CpuIsa::kAvx2) {
    SumInt4NibblesAvx2(x, count, inverse, sums);
    return {sums[0], sums[1]};
  }
#endif
  SumInt4NibblesPortable(x, count, inverse, sums);
  return {sums[0], sums[1]};
}

// The part of sum((x - q scale)^2) that depends on the candidate, in the exporter's order of operations (this
// file is built with -ffp-contract=off, so no multiply-add fuses two roundings into one).
inline double CandidateError(double scale, const NibbleSums& sums) {
  return scale * scale * sums.qq - 2.0 * scale * sums.xq;
}

// One group as the exporter quantizes it: q + 8 in [0, 15] per input. The plain candidate rounds at and
// scales by amax / 8 when the largest magnitude (its first occurrence, as torch's argmax picks) is negative,
// else amax / 7, so that weight lands exactly on -8 or 7.
template <typename T>
void QuantizeGroup(const T* weights, int64_t count, uint8_t* out, float& scale) {
  double x[128];
  float amax = 0.f;
  bool nan = false, negative_extreme = false;
  for (int64_t i = 0; i < count; ++i) {
    const float value = static_cast<float>(weights[i]);
    x[i] = value;
    const float magnitude = std::fabs(value);
    nan |= std::isnan(magnitude);
    if (magnitude > amax) {
      amax = magnitude;
      negative_extreme = value < 0.f;
    }
  }
  if (nan || amax == 0.f) {
    scale = nan ? std::numeric_limits<float>::quiet_NaN() : 1.f;
    std::memset(out, 0x88, count / 2);
    return;
  }
  double best_scale = amax / (negative_extreme ? 8.f : 7.f);
  double best_rounding = best_scale;
  double best_error = CandidateError(best_scale, SumNibbles(x, count, best_rounding));
  for (const double divisor : kInt4ScaleDivisors) {
    const double rounding = amax / divisor;
    const NibbleSums sums = SumNibbles(x, count, rounding);
    const double fitted = static_cast<float>(sums.xq / sums.qq);
    const double error = CandidateError(fitted, sums);
    if (error < best_error) {
      best_scale = fitted;
      best_rounding = rounding;
      best_error = error;
    }
  }
  scale = static_cast<float>(best_scale);
  const double inverse = 1.0 / best_rounding;
  for (int64_t i = 0; i < count; i += 2) {
    const int low = static_cast<int>(Int4Nibble(x[i], inverse));
    const int high = static_cast<int>(Int4Nibble(x[i + 1], inverse));
    out[i / 2] = static_cast<uint8_t>((low + 8) | ((high + 8) << 4));
  }
}

inline int SignedNibble(uint32_t word, int position) {
  const int value = static_cast<int>((word >> (4 * position)) & 0xFu);
  return (value ^ 8) - 8;
}

inline uint32_t Word(const uint8_t* panel, int64_t octet, int64_t c) {
  uint32_t word;
  std::memcpy(&word, panel + octet * kOctetBytes + 4 * c, sizeof(word));
  return word;
}

}  // namespace

bool IsSupportedInt4GroupSize(int64_t group_size) { return group_size == 32 || group_size == 64 || group_size == 128; }

std::pair<at::Tensor, at::Tensor> QuantizeInt4(const at::Tensor& weight_in, int64_t group_size) {
  TORCH_CHECK(weight_in.dim() == 2 && weight_in.is_floating_point(), "QuantizeInt4: needs a 2-d floating weight");
  TORCH_CHECK(IsSupportedInt4GroupSize(group_size), "int4 group size ", group_size,
              " is not supported (32, 64 or 128)");
  const int64_t n = weight_in.size(0), k = weight_in.size(1);
  TORCH_CHECK(k % group_size == 0, "int4 group size ", group_size, " does not divide ", k, " inputs");
  TORCH_CHECK(weight_in.is_cpu(), "QuantizeInt4: int4 weights are for the CPU kernels");
  const at::Tensor weight = weight_in.contiguous();
  const int64_t groups = k / group_size;
  at::Tensor quantized = at::empty({n, k / 2}, weight.options().dtype(at::kByte));
  at::Tensor scales = at::empty({n, groups}, weight.options().dtype(at::kFloat));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, weight.scalar_type(), "QuantizeInt4", [&] {
    const scalar_t* source = weight.data_ptr<scalar_t>();
    uint8_t* q = quantized.data_ptr<uint8_t>();
    float* scale_out = scales.data_ptr<float>();
    at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        for (int64_t g = 0; g < groups; ++g) {
          QuantizeGroup(source + row * k + g * group_size, group_size, q + row * (k / 2) + g * group_size / 2,
                        scale_out[row * groups + g]);
        }
      }
    });
  });
  return {quantized, scales};
}

bool HasInt4ZeroPoints(const at::Tensor& scales) { return scales.dim() == 3 && scales.size(2) == 2; }

at::Tensor PackInt4Scales(const at::Tensor& scales, const std::vector<int64_t>& column_order) {
  if (!HasInt4ZeroPoints(scales)) return PackScales(scales, column_order);
  TORCH_CHECK(scales.scalar_type() == at::kFloat, "PackInt4Scales: needs float32 scales and zero points");
  const at::Tensor offsets = 8 - scales.select(2, 1);
  return at::stack(
      {PackScales(scales.select(2, 0).contiguous(), column_order), PackScales(offsets.contiguous(), column_order)});
}

bool IsPackedInt4Scales(const at::Tensor& scales, const at::Tensor& packed) {
  if (scales.dim() == 4) {
    return scales.size(0) == 2 && scales.is_contiguous() && IsPackedScales(scales.select(0, 0), packed);
  }
  return IsPackedScales(scales, packed);
}

int64_t PackedInt4WeightBytes(const at::Tensor& weight, const std::vector<int64_t>& column_order) {
  const int64_t columns = column_order.empty() ? weight.size(0) : static_cast<int64_t>(column_order.size());
  return PanelCount(columns) * PaddedDepth(2 * weight.size(1)) / 2 * kPanelWidth;
}

at::Tensor PackInt4Weight(const at::Tensor& weight_in, const std::vector<int64_t>& column_order, HugePageArena* arena) {
  TORCH_CHECK(weight_in.dim() == 2 && weight_in.device().is_cpu() && weight_in.scalar_type() == at::kByte,
              "PackInt4Weight: needs a 2-d uint8 CPU tensor (two int4 values a byte)");
  const at::Tensor weight = weight_in.contiguous();
  const int64_t n = weight.size(0), half_k = weight.size(1), k_padded = PaddedDepth(2 * half_k);
  const int64_t columns = column_order.empty() ? n : static_cast<int64_t>(column_order.size());
  const int64_t panels = PanelCount(columns), octets = k_padded / 8;
  for (const int64_t row : column_order) TORCH_CHECK(row < n, "PackInt4Weight: column order names row ", row);
  const std::vector<int64_t> sizes = {panels, octets, kPanelWidth, 4};
  at::Tensor packed = arena != nullptr ? arena->Empty(sizes, at::kByte) : at::empty(sizes, weight.options());
  const uint8_t* source = weight.data_ptr<uint8_t>();
  uint8_t* dest = packed.data_ptr<uint8_t>();
  at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t c = 0; c < kPanelWidth; ++c) {
        const int64_t column = p * kPanelWidth + c;
        const int64_t row =
            column_order.empty() ? (column < n ? column : -1) : (column < columns ? column_order[column] : -1);
        const uint8_t* src = row >= 0 ? source + row * half_k : nullptr;
        for (int64_t o = 0; o < octets; ++o) {
          uint32_t word = 0;
          for (int64_t j = 0; j < 4 && src != nullptr; ++j) {
            const int64_t byte_index = 4 * o + j;
            if (byte_index >= half_k) break;
            const uint32_t byte = src[byte_index] ^ 0x88u;  // offset binary -> two's complement nibbles
            word |= (byte & 0xFu) << (4 * j) | (byte >> 4) << (16 + 4 * j);
          }
          std::memcpy(dest + (p * octets + o) * kOctetBytes + 4 * c, &word, sizeof(word));
        }
      }
    }
  });
  return packed;
}

bool IsPackedInt4Weight(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kByte && tensor.dim() == 4 && tensor.size(2) == kPanelWidth && tensor.size(3) == 4;
}

at::Tensor UnpackInt4Weight(const at::Tensor& packed, int64_t columns, int64_t k) {
  TORCH_CHECK(IsPackedInt4Weight(packed) && packed.is_contiguous(), "UnpackInt4Weight: needs a packed int4 weight");
  TORCH_CHECK(k % 2 == 0 && k <= packed.size(1) * 8 && columns <= packed.size(0) * kPanelWidth,
              "UnpackInt4Weight: asks for more than the packed weight holds");
  at::Tensor out = at::empty({columns, k / 2}, packed.options());
  const uint8_t* base = packed.data_ptr<uint8_t>();
  uint8_t* dest = out.data_ptr<uint8_t>();
  const int64_t panel_bytes = packed.size(1) * kOctetBytes;
  for (int64_t column = 0; column < columns; ++column) {
    const uint8_t* panel = base + column / kPanelWidth * panel_bytes;
    for (int64_t i = 0; i < k / 2; ++i) {
      const uint32_t word = Word(panel, i / 4, column % kPanelWidth);
      const int j = static_cast<int>(i % 4);
      const uint32_t low = (word >> (4 * j)) & 0xFu, high = (word >> (16 + 4 * j)) & 0xFu;
      dest[column * (k / 2) + i] = static_cast<uint8_t>((low | high << 4) ^ 0x88u);
    }
  }
  return out;
}

const void* DequantizeInt4Panel(const uint8_t* panel, const float* scales, int64_t weight_groups, int64_t k,
                                int64_t k_padded, at::ScalarType dtype, const float* zero_offsets) {
  const int64_t group_pairs = weight_groups == 1 ? k_padded / 2 : k / weight_groups / 2;
  // With zero points, (nibble + 8 - z) * scale = (u - z) * scale: the package's value, rounded once.
  if (dtype == at::kBFloat16) {
    thread_local CacheAlignedVector<uint16_t> halves;
    halves.resize(k_padded * kPanelWidth);  // grows once, to the widest panel
#ifdef LLMC_CPU_X86_KERNELS
    if (ActiveCpuIsa() >= CpuIsa::kAvx512Bf16) {
      DequantizeInt4PanelBf16Avx512(panel, scales, zero_offsets, weight_groups, group_pairs, k_padded / 2,
                                    halves.data());
      return halves.data();
    }
#endif
    DequantizeInt4PanelBf16Portable(panel, scales, zero_offsets, weight_groups, group_pairs, k_padded / 2,
                                    halves.data());
    return halves.data();
  }
  thread_local CacheAlignedVector<float> values;
  values.resize(k_padded * kPanelWidth);
  for (int64_t o = 0; o < k_padded / 8; ++o) {
    const int64_t group_at = std::min(4 * o / group_pairs, weight_groups - 1) * kPanelWidth;
    for (int64_t c = 0; c < kPanelWidth; ++c) {  // float32 panels are [k][64]
      const uint32_t word = Word(panel, o, c);
      const float scale = scales[group_at + c];
      const float offset = zero_offsets == nullptr ? 0.0f : zero_offsets[group_at + c];
      for (int64_t r = 0; r < 8; ++r) {
        values[(8 * o + r) * kPanelWidth + c] =
            (static_cast<float>(SignedNibble(word, Int4NibblePosition(r))) + offset) * scale;
      }
    }
  }
  return values.data();
}

void GatherInt4Columns(const at::Tensor& packed, const at::Tensor& scales_in, const int64_t* ids, int64_t count,
                       int64_t k, at::Tensor& out) {
  const bool zero_points = scales_in.dim() == 4;
  const at::Tensor scales = zero_points ? scales_in.select(0, 0) : scales_in;
  const int64_t groups = scales.size(1), group_size = k / groups;
  const int64_t panel_bytes = packed.size(1) * kOctetBytes;
  const uint8_t* base = packed.data_ptr<uint8_t>();
  const float* scale_data = scales.data_ptr<float>();
  const float* offset_data = zero_points ? scales_in.select(0, 1).data_ptr<float>() : nullptr;
  at::Tensor rows = at::empty({count, k}, out.options().dtype(at::kFloat));
  float* dest = rows.data_ptr<float>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t panel = ids[i] / kPanelWidth, c = ids[i] % kPanelWidth;
    const float* column_scales = scale_data + panel * groups * kPanelWidth + c;
    const float* column_offsets = offset_data == nullptr ? nullptr : offset_data + panel * groups * kPanelWidth + c;
    for (int64_t kk = 0; kk < k; ++kk) {
      const uint32_t word = Word(base + panel * panel_bytes, kk / 8, c);
      const int64_t at = (kk / group_size) * kPanelWidth;
      const int offset = column_offsets == nullptr ? 0 : static_cast<int>(column_offsets[at]);
      dest[i * k + kk] =
          static_cast<float>(SignedNibble(word, Int4NibblePosition(kk % 8)) + offset) * column_scales[at];
    }
  }
  out.copy_(rows);
}

}  // namespace llmc::model::cpu
