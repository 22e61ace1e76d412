#ifndef LLMC_WORKER_MODEL_CPU_INT4_REQUANTIZE_H_
#define LLMC_WORKER_MODEL_CPU_INT4_REQUANTIZE_H_

// int4 prefill as int8 (panel_matmul.cc). Summed per group of 32-128 inputs, int4 weights end every group's
// products with a float epilogue. On AMX-INT8 tiles those epilogues do not overlap the products: W4A8 ran at half of
// W8A8's rate (llmc_panel_kernel_bench --tiles). On an Ice Lake Xeon's avx512_vnni path, PanelW4A8Avx512 ran prefill
// 512 in 1.27-1.28 times PanelW8A8Avx512's time. So for large batches each panel is requantized to int8 with one scale
// per column, and runs PanelW8A8Amx, or PanelW8A8Avx512, against activations with one scale per row.
//
// Column c's largest group scale s_max keeps its values exactly: v = (q + 8 - z) * T, with T = 15 for symmetric
// weights (|q| <= 8, so |v| <= 120) and 7 with zero points (|u - z| <= 16, |v| <= 112); the column's scale is
// s_max / T. Every other group g lands on round((q + 8 - z) * t_g), t_g = (s_g * T) / s_max rounded to float, at
// most half a column step (s_max / T / 2) from its value. A weight requantizes only if every group keeps at least
// kMinInt4RequantizedStep int8 steps per int4 step (t_g >= 2, or s_g = 0): the added error is then at most a quarter
// of the group's own int4 step. Others run as smaller batches do (per group on the tiles, or, for groups of 32,
// dequantized to bfloat16 panels).
#include <cstdint>

#include "worker/model/cpu/panel_matmul.h"

namespace llmc::model::cpu {

constexpr float kInt4RequantizeSymmetricSteps = 15.0f;
constexpr float kInt4RequantizeZeroPointSteps = 7.0f;
constexpr float kMinInt4RequantizedStep = 2.0f;
// Requantizing costs each panel a table per group and a lookup per weight, paid once however many rows multiply it;
// the per-group epilogues cost every row. On the tiles, from 128 rows the requantized panels are as fast, and faster
// beyond (Xeon, Qwen2-0.5B shape, groups of 128, 2026-12-01: prefill 64 45 ms against 42 per group, 128 69 against
// 68, 256 119 against 131, 512 251 against 294-316). On the avx512_vnni path from 64 rows (Ice Lake Xeon, 2 threads,
// 2026-12-01, int4's step time over int8's: prefill 64 1.03x against 1.20x per group, 128 0.99x against 1.28x, 512
// 1.00x against 1.28x; decode b=32 1.11-1.14x either way).
constexpr int64_t kInt4RequantizedMinRowsOnTiles = 128;
constexpr int64_t kInt4RequantizedMinRowsAvx512 = 64;
// The one of the two for the active path.
int64_t Int4RequantizedMinRows();

// Whether the active kernel path multiplies large int4 batches requantized: with AMX-INT8 (on the tiles), and on the
// avx512_vnni path where the CPU has AVX512_VBMI for the requantization's lookups (PanelW8A8Avx512). The avx512_bf16
// path (AMD Zen 4 and 5) keeps W4A8, which ran its prefill within 10-12 % of W8A8's time there; requantizing was not
// measured on it.
bool RequantizesLargeInt4Batches();

// Whether every panel of the int4 `weight` (not MXFP4) requantizes, as above: a scan of its scales, remembered per
// weight for the process. The loader asks for every int4 weight it packs where RequantizesLargeInt4Batches, so no
// step pays for the scan.
bool Int4RequantizesToInt8(const PanelWeight& weight);

// One panel's factors t [weight_groups][kPanelWidth], integer offsets 8 - z (0 without zero points) alike, and
// column scales [kPanelWidth], from its scales (and zero offsets, or null).
void Int4RequantizeFactors(const float* scales, const float* zero_offsets, int64_t weight_groups, float* factors,
                           int32_t* offsets, float* column_scales);

// One int4 panel (int4_weight.h's layout, `group_pairs` k pairs per scale group) requantized with those factors:
// values [k_padded][kPanelWidth], v = nearbyint(float(q + offset) * t) for q the signed nibble. What
// RequantizedInt4TilePanel (panel_kernels.h) lays out for the tiles, the same bytes.
void RequantizeInt4PanelPortable(const uint8_t* panel, const float* factors, const int32_t* offsets,
                                 int64_t weight_groups, int64_t group_pairs, int64_t k_padded, int8_t* values);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_INT4_REQUANTIZE_H_
