#ifndef LLMC_WORKER_MODEL_CPU_PACKED_WEIGHT_H_
#define LLMC_WORKER_MODEL_CPU_PACKED_WEIGHT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "worker/model/cpu/huge_page_arena.h"

namespace llmc::model::cpu {

// A weight matrix [N, K] repacked for the CPU kernels: panels of kPanelWidth output columns, K padded with
// zeros to kDepthAlign. bfloat16 and int8: [panels, k_padded / 2, kPanelWidth, 2] (each k pair of a column adjacent,
// the layout AMX and AVX512-BF16 dot products take); float32: [panels, k_padded, kPanelWidth]. A panel is
// one contiguous run of memory, so a thread that owns a range of panels streams its weights in order.
int64_t PaddedDepth(int64_t k);
int64_t PanelCount(int64_t columns);

// `column_order[c]` is the source row of packed column c (-1: zeros); empty means 0..N-1. The packed tensor
// comes from `arena` when given (huge pages), else from at::empty. Throws c10::Error for a tensor it cannot
// pack (not 2-d, not bfloat16/float32/int8, not on the CPU).
at::Tensor PackWeight(const at::Tensor& weight, const std::vector<int64_t>& column_order = {},
                      HugePageArena* arena = nullptr);
// The bytes PackWeight's result takes.
int64_t PackedWeightBytes(const at::Tensor& weight, const std::vector<int64_t>& column_order = {});

// Whether `tensor` has the packed layout (by rank: 4-d bfloat16 or int8, 3-d float32, or int4's, int4_weight.h).
bool IsPackedWeight(const at::Tensor& tensor);
int64_t PackedDepth(const at::Tensor& packed);

// int8 weights (W8A16): symmetric, one float32 scale per output row or per group of `group_size` inputs.
// `weight` [N, K] (any floating type) -> int8 [N, K] and scales [N, G] (G = 1, or K / group_size):
// scale = max |w| / 127 over the row or group (1 where all are zero), q = round-half-even(w / scale) clamped
// to [-127, 127]. tools/llmc_export/quantize.py computes the very same. Throws c10::Error for a group size
// that does not divide K or is not one of 32, 64, 128, 256, 512 (0: per row).
std::pair<at::Tensor, at::Tensor> QuantizeInt8(const at::Tensor& weight, int64_t group_size);
bool IsSupportedInt8GroupSize(int64_t group_size);

// Scales [N, G] in the packed weight's column order: [panels, G, kPanelWidth] float32, zeros past the columns.
at::Tensor PackScales(const at::Tensor& scales, const std::vector<int64_t>& column_order = {});
// Per-row values [N, groups] of any dtype (kept) in a packed weight's column order: [panels, groups, kPanelWidth],
// zeros for the columns past N. PackScales is this in float32.
at::Tensor PackColumnGroups(const at::Tensor& values, const std::vector<int64_t>& column_order = {});
// Whether `scales` is a packed scale tensor for `packed` (an int8 packed weight).
bool IsPackedScales(const at::Tensor& scales, const at::Tensor& packed);

// Gate and up projections stacked as [gate; up] ([2 * intermediate, K]) are packed so that panel p holds gate
// rows 32p..32p+31 then the matching up rows: one panel yields 32 finished SiLU(gate) * up values.
std::vector<int64_t> GateUpColumnOrder(int64_t intermediate);

// Rows `ids` of the original matrix (packed column ids[i]), first `k` values, into out [ids.size(), k] of the
// packed tensor's type: the embedding lookup of a tied, packed LM head.
// An int8 or int4 packed weight's rows are dequantized with its packed scales (`scales` undefined otherwise).
void GatherPackedColumns(const at::Tensor& packed, const at::Tensor& scales, const int64_t* ids, int64_t count,
                         int64_t k, at::Tensor& out);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_PACKED_WEIGHT_H_
