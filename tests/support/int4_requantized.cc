#include "tests/support/int4_requantized.h"

#include <algorithm>
#include <vector>

#include "worker/model/cpu/int4_requantize.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::testing {

at::Tensor RequantizedInt4Matrix(const at::Tensor& packed, const at::Tensor& scales, int64_t n, int64_t k) {
  using model::cpu::kPanelWidth;
  const model::cpu::PanelWeight weight(packed, scales);
  const at::Tensor group_scales = weight.scales.contiguous();
  const at::Tensor zero_offsets = weight.zero_offsets.defined() ? weight.zero_offsets.contiguous() : at::Tensor();
  const int64_t panels = packed.size(0), groups = group_scales.size(1), k_padded = model::cpu::PackedDepth(packed);
  const int64_t group_pairs = groups == 1 ? k_padded / 2 : k / groups / 2;
  const int64_t panel_bytes = k_padded * kPanelWidth / 2;
  std::vector<float> factors(groups * kPanelWidth), column_scales(kPanelWidth);
  std::vector<int32_t> offsets(groups * kPanelWidth);
  std::vector<int8_t> values(k_padded * kPanelWidth);
  at::Tensor matrix = at::zeros({panels * kPanelWidth, k}, at::kFloat);
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t at = p * groups * kPanelWidth;
    model::cpu::Int4RequantizeFactors(group_scales.data_ptr<float>() + at,
                                      zero_offsets.defined() ? zero_offsets.data_ptr<float>() + at : nullptr, groups,
                                      factors.data(), offsets.data(), column_scales.data());
    model::cpu::RequantizeInt4PanelPortable(packed.data_ptr<uint8_t>() + p * panel_bytes, factors.data(),
                                            offsets.data(), groups, group_pairs, k_padded, values.data());
    for (int64_t c = 0; c < kPanelWidth; ++c) {
      float* row = matrix.data_ptr<float>() + (p * kPanelWidth + c) * k;
      for (int64_t i = 0; i < k; ++i) row[i] = static_cast<float>(values[i * kPanelWidth + c]) * column_scales[c];
    }
  }
  return matrix.narrow(0, 0, n).contiguous();
}

at::Tensor RowWideByteQuantized(const at::Tensor& x) {
  const at::Tensor rows = x.to(at::kFloat);
  std::vector<at::Tensor> pieces;
  for (int64_t begin = 0; begin < rows.size(1); begin += model::cpu::kMaxInt8ActivationGroup) {
    const at::Tensor piece = rows.narrow(1, begin, std::min(model::cpu::kMaxInt8ActivationGroup, rows.size(1) - begin));
    const at::Tensor scale = piece.abs().amax(-1, /*keepdim=*/true) / 127;
    pieces.push_back(at::round(piece * at::reciprocal(scale)).clamp(-127, 127) * scale);
  }
  return at::cat(pieces, 1);
}

}  // namespace llmc::testing
