#ifndef LLMC_WORKER_MODEL_CPU_INT4_WEIGHT_H_
#define LLMC_WORKER_MODEL_CPU_INT4_WEIGHT_H_

// int4 weights (W4A16): symmetric 4-bit values with one float32 scale per group of 32, 64 or 128 inputs.
//
// In a package (and after quantizing at load, before packing) a matrix [N, K] is uint8 [N, K / 2]: byte i of a
// row holds input 2i in its low nibble and 2i + 1 in its high nibble, each as q + 8 (offset binary, 1..15 from
// the quantizer, 0 read as -8), beside float32 scales [N, K / group_size]: W[n, k] = q[n, k] * scale[n, k / gs].
// Packed for the CPU kernels: uint8 [panels, K_padded / 8, kPanelWidth, 4], one 32-bit word per column and k
// octet in the order panel_kernels.h gives, the nibbles two's complement; scales packed as int8's (PackScales).
//
// Zero points (asymmetric int4, format version 11): the package's scales are float32 [N, K / group_size, 2],
// each group's scale then its zero point z (an integer, 0..16; 16 only from GPTQ's older checkpoints), and
// W[n, k] = (u - z) * scale with u the stored nibble (0..15). Packed, they are [2, panels, groups, kPanelWidth]:
// the packed scales, then 8 - z. The kernels keep their u - 8 arithmetic and add (8 - z) * scale times each
// group's sum of the activations (panel_matmul.cc); dequantized panels apply z directly.
#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "worker/model/cpu/huge_page_arena.h"

namespace llmc::model::cpu {

bool IsSupportedInt4GroupSize(int64_t group_size);  // 32, 64, 128

// `weight` [N, K] (any floating type, K a multiple of group_size) -> uint8 [N, K / 2] and float32 scales
// [N, K / group_size]: scale = max |w| / 8 over the group when its (first) largest magnitude is negative,
// else max |w| / 7 (1 where all are zero, NaN where one is NaN), q = round-half-even(w / scale) clamped to
// [-8, 7] (0 where NaN). tools/llmc_export/quantize.py computes the
// very same. Throws c10::Error for an unsupported group size or one that does not divide K.
std::pair<at::Tensor, at::Tensor> QuantizeInt4(const at::Tensor& weight, int64_t group_size);

// Whether a package's (unpacked) int4 scales carry zero points: float32 [N, G, 2].
bool HasInt4ZeroPoints(const at::Tensor& scales);
// The package's scales (with or without zero points) in the packed weight's column order (`column_order` as
// PackScales'): [panels, G, kPanelWidth], or [2, panels, G, kPanelWidth] with zero points.
at::Tensor PackInt4Scales(const at::Tensor& scales, const std::vector<int64_t>& column_order = {});
// Whether `scales` (as the operators receive them) are packed int4 scales, with or without zero points, for `packed`.
bool IsPackedInt4Scales(const at::Tensor& scales, const at::Tensor& packed);

// A package's uint8 [N, K / 2] matrix into the kernels' panels (`column_order` as PackWeight's), from `arena`
// when given.
at::Tensor PackInt4Weight(const at::Tensor& weight, const std::vector<int64_t>& column_order = {},
                          HugePageArena* arena = nullptr);
int64_t PackedInt4WeightBytes(const at::Tensor& weight, const std::vector<int64_t>& column_order = {});
// Whether `tensor` has the packed int4 layout.
bool IsPackedInt4Weight(const at::Tensor& tensor);
// The first `columns` packed columns back as the package's uint8 [columns, k / 2] (tests: round trips).
at::Tensor UnpackInt4Weight(const at::Tensor& packed, int64_t columns, int64_t k);

// One packed int4 panel (scales [weight_groups][64] over `k` inputs; with zero points their 8 - z laid out
// alike, else null) as a plain kernels' panel in `dtype` (bfloat16 rounded to nearest even, or float32), in a
// buffer of the calling thread until its next call.
const void* DequantizeInt4Panel(const uint8_t* panel, const float* scales, int64_t weight_groups, int64_t k,
                                int64_t k_padded, at::ScalarType dtype, const float* zero_offsets = nullptr);

// Rows `ids` of the original matrix, dequantized to float32, into out [count, k] (any floating dtype): the
// embedding lookup of a tied int4 LM head. `scales` as the operators receive them (IsPackedInt4Scales).
void GatherInt4Columns(const at::Tensor& packed, const at::Tensor& scales, const int64_t* ids, int64_t count, int64_t k,
                       at::Tensor& out);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_INT4_WEIGHT_H_
