#include "worker/model/cpu/packed_weight.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {
namespace {

template <typename T>
void PackPanels(const T* source, int64_t n, int64_t k, const std::vector<int64_t>& order, int64_t pair, T* dest,
                int64_t panels, int64_t k_padded) {
  at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      T* panel = dest + p * k_padded * kPanelWidth;
      for (int64_t c = 0; c < kPanelWidth; ++c) {
        const int64_t packed_column = p * kPanelWidth + c;
        const int64_t row = order.empty() ? (packed_column < n ? packed_column : -1) : order[packed_column];
        const T* src = row >= 0 ? source + row * k : nullptr;
        for (int64_t kk = 0; kk < k_padded; ++kk) {
          // Element (column c, depth kk) sits at [kk / pair][c][kk % pair].
          panel[(kk / pair) * kPanelWidth * pair + c * pair + kk % pair] = src != nullptr && kk < k ? src[kk] : T(0);
        }
      }
    }
  });
}

// One group as the exporter quantizes it, in float32: scale = max |w| / 127 (1 where all are zero, NaN where
// one is NaN), q = round-half-even(w / scale) clamped to [-127, 127], 0 where that is NaN.
template <typename T>
void QuantizeGroup(const T* weights, int64_t count, int8_t* out, float& scale) {
  float amax = 0.f;
  bool nan = false;
  for (int64_t i = 0; i < count; ++i) {
    const float magnitude = std::fabs(static_cast<float>(weights[i]));
    nan |= std::isnan(magnitude);
    amax = std::max(amax, magnitude);
  }
  scale = nan ? std::numeric_limits<float>::quiet_NaN() : amax == 0.f ? 1.f : amax / 127.f;
  for (int64_t i = 0; i < count; ++i) {
    const float rounded = std::nearbyint(static_cast<float>(weights[i]) / scale);
    out[i] = std::isnan(rounded) ? int8_t{0} : static_cast<int8_t>(std::clamp(rounded, -127.f, 127.f));
  }
}

}  // namespace

int64_t PaddedDepth(int64_t k) { return (k + kDepthAlign - 1) / kDepthAlign * kDepthAlign; }
int64_t PanelCount(int64_t columns) { return (columns + kPanelWidth - 1) / kPanelWidth; }

int64_t PackedWeightBytes(const at::Tensor& weight, const std::vector<int64_t>& column_order) {
  const int64_t columns = column_order.empty() ? weight.size(0) : static_cast<int64_t>(column_order.size());
  return PanelCount(columns) * PaddedDepth(weight.size(1)) * kPanelWidth * static_cast<int64_t>(weight.element_size());
}

at::Tensor PackWeight(const at::Tensor& weight_in, const std::vector<int64_t>& column_order, HugePageArena* arena) {
  TORCH_CHECK(weight_in.dim() == 2 && weight_in.device().is_cpu(), "PackWeight: needs a 2-d CPU tensor");
  const at::Tensor weight = weight_in.contiguous();
  const int64_t n = weight.size(0), k = weight.size(1), k_padded = PaddedDepth(k);
  const int64_t columns = column_order.empty() ? n : static_cast<int64_t>(column_order.size());
  const int64_t panels = PanelCount(columns);
  std::vector<int64_t> order = column_order;
  if (!order.empty()) {
    for (const int64_t row : order) TORCH_CHECK(row < n, "PackWeight: column order names row ", row, " of ", n);
    order.resize(panels * kPanelWidth, -1);
  }
  const auto empty = [&](at::IntArrayRef sizes) {
    return arena != nullptr ? arena->Empty(sizes, weight.scalar_type()) : at::empty(sizes, weight.options());
  };
  if (weight.scalar_type() == at::kBFloat16) {
    at::Tensor packed = empty({panels, k_padded / 2, kPanelWidth, 2});
    PackPanels(reinterpret_cast<const uint16_t*>(weight.data_ptr()), n, k, order, 2,
               reinterpret_cast<uint16_t*>(packed.data_ptr()), panels, k_padded);
    return packed;
  }
  if (weight.scalar_type() == at::kChar) {
    at::Tensor packed = empty({panels, k_padded / 2, kPanelWidth, 2});
    PackPanels(weight.data_ptr<int8_t>(), n, k, order, 2, packed.data_ptr<int8_t>(), panels, k_padded);
    return packed;
  }
  TORCH_CHECK(weight.scalar_type() == at::kFloat, "PackWeight: bfloat16, float32 or int8 weights only");
  at::Tensor packed = empty({panels, k_padded, kPanelWidth});
  PackPanels(weight.data_ptr<float>(), n, k, order, 1, packed.data_ptr<float>(), panels, k_padded);
  return packed;
}

bool IsPackedWeight(const at::Tensor& tensor) {
  return IsPackedInt4Weight(tensor) ||
         ((tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kChar) && tensor.dim() == 4 &&
          tensor.size(2) == kPanelWidth && tensor.size(3) == 2) ||
         (tensor.scalar_type() == at::kFloat && tensor.dim() == 3 && tensor.size(2) == kPanelWidth);
}

int64_t PackedDepth(const at::Tensor& packed) {
  if (IsPackedInt4Weight(packed)) return packed.size(1) * 8;
  return packed.dim() == 4 ? packed.size(1) * 2 : packed.size(1);
}

bool IsSupportedInt8GroupSize(int64_t group_size) {
  return group_size == 0 || group_size == 32 || group_size == 64 || group_size == 128 || group_size == 256 ||
         group_size == 512;
}

std::pair<at::Tensor, at::Tensor> QuantizeInt8(const at::Tensor& weight_in, int64_t group_size) {
  TORCH_CHECK(weight_in.dim() == 2 && weight_in.is_floating_point(), "QuantizeInt8: needs a 2-d floating weight");
  const int64_t n = weight_in.size(0), k = weight_in.size(1);
  TORCH_CHECK(IsSupportedInt8GroupSize(group_size), "int8 group size ", group_size,
              " is not supported (0 for one scale per row, or 32, 64, 128, 256, 512)");
  TORCH_CHECK(group_size == 0 || k % group_size == 0, "int8 group size ", group_size, " does not divide ", k,
              " inputs");
  const int64_t groups = group_size == 0 ? 1 : k / group_size;
  if (!weight_in.is_cpu()) {  // a GPU worker quantizing at load: on the host, then back
    auto [quantized, scales] = QuantizeInt8(weight_in.to(at::kCPU), group_size);
    return {quantized.to(weight_in.device()), scales.to(weight_in.device())};
  }
  const at::Tensor weight = weight_in.contiguous();
  at::Tensor quantized = at::empty({n, k}, weight.options().dtype(at::kChar));
  at::Tensor scales = at::empty({n, groups}, weight.options().dtype(at::kFloat));
  // Row by row in place, with no temporaries: quantizing a 151,936-row LM head at load through ATen
  // expressions, even a few thousand rows at a time, left 860 MB of freed temporaries resident.
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, weight.scalar_type(), "QuantizeInt8", [&] {
    const scalar_t* source = weight.data_ptr<scalar_t>();
    int8_t* q = quantized.data_ptr<int8_t>();
    float* scale_out = scales.data_ptr<float>();
    at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        for (int64_t g = 0; g < groups; ++g) {
          QuantizeGroup(source + row * k + g * (k / groups), k / groups, q + row * k + g * (k / groups),
                        scale_out[row * groups + g]);
        }
      }
    });
  });
  return {quantized, scales};
}

at::Tensor PackScales(const at::Tensor& scales, const std::vector<int64_t>& column_order) {
  TORCH_CHECK(scales.dim() == 2, "PackScales: needs [N, groups] scales");
  return PackColumnGroups(scales.to(at::kFloat), column_order);
}

at::Tensor PackColumnGroups(const at::Tensor& values_in, const std::vector<int64_t>& column_order) {
  TORCH_CHECK(values_in.dim() == 2, "PackColumnGroups: needs [N, groups] values");
  const at::Tensor values = values_in.contiguous();
  const int64_t n = values.size(0), groups = values.size(1);
  const int64_t columns = column_order.empty() ? n : static_cast<int64_t>(column_order.size());
  at::Tensor packed = at::zeros({PanelCount(columns), groups, kPanelWidth}, values.options());
  const auto element = static_cast<int64_t>(values.element_size());
  const auto* src = static_cast<const char*>(values.data_ptr());
  auto* dst = static_cast<char*>(packed.data_ptr());
  for (int64_t column = 0; column < columns; ++column) {
    const int64_t row = column_order.empty() ? column : column_order[column];
    if (row < 0) continue;
    TORCH_CHECK(row < n, "PackColumnGroups: column order names row ", row, " of ", n);
    const int64_t panel = column / kPanelWidth, c = column % kPanelWidth;
    for (int64_t g = 0; g < groups; ++g) {
      std::memcpy(dst + ((panel * groups + g) * kPanelWidth + c) * element, src + (row * groups + g) * element,
                  static_cast<size_t>(element));
    }
  }
  return packed;
}

bool IsPackedScales(const at::Tensor& scales, const at::Tensor& packed) {
  return scales.scalar_type() == at::kFloat && scales.dim() == 3 && scales.size(0) == packed.size(0) &&
         scales.size(2) == kPanelWidth && scales.is_contiguous();
}

std::vector<int64_t> GateUpColumnOrder(int64_t intermediate) {
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t panels = (intermediate + kHalf - 1) / kHalf;
  std::vector<int64_t> order(panels * kPanelWidth, -1);
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t c = 0; c < kHalf; ++c) {
      const int64_t i = p * kHalf + c;
      if (i >= intermediate) break;
      order[p * kPanelWidth + c] = i;
      order[p * kPanelWidth + kHalf + c] = intermediate + i;
    }
  }
  return order;
}

void GatherPackedColumns(const at::Tensor& packed, const at::Tensor& scales, const int64_t* ids, int64_t count,
                         int64_t k, at::Tensor& out) {
  if (IsPackedInt4Weight(packed)) {
    GatherInt4Columns(packed, scales, ids, count, k, out);
    return;
  }
  const int64_t k_padded = PackedDepth(packed), pair = packed.dim() == 4 ? 2 : 1;
  if (packed.scalar_type() == at::kChar) {
    const int64_t groups = scales.size(1), group_size = k / groups;
    const int8_t* base = packed.data_ptr<int8_t>();
    const float* scale_data = scales.data_ptr<float>();
    at::Tensor rows = at::empty({count, k}, out.options().dtype(at::kFloat));
    float* dest = rows.data_ptr<float>();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t panel = ids[i] / kPanelWidth, c = ids[i] % kPanelWidth;
      const int8_t* src = base + panel * k_padded * kPanelWidth;
      const float* column_scales = scale_data + panel * groups * kPanelWidth + c;
      for (int64_t kk = 0; kk < k; ++kk) {
        dest[i * k + kk] = static_cast<float>(src[(kk / 2) * kPanelWidth * 2 + c * 2 + kk % 2]) *
                           column_scales[(kk / group_size) * kPanelWidth];
      }
    }
    out.copy_(rows);
    return;
  }
  const int64_t element = packed.element_size();
  const auto* base = static_cast<const char*>(packed.data_ptr());
  auto* dest = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t panel = ids[i] / kPanelWidth, c = ids[i] % kPanelWidth;
    const char* src = base + panel * k_padded * kPanelWidth * element;
    for (int64_t kk = 0; kk < k; ++kk) {
      std::memcpy(dest + (i * k + kk) * element,
                  src + ((kk / pair) * kPanelWidth * pair + c * pair + kk % pair) * element, element);
    }
  }
}

}  // namespace llmc::model::cpu
