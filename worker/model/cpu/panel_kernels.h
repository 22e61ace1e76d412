#ifndef LLMC_WORKER_MODEL_CPU_PANEL_KERNELS_H_
#define LLMC_WORKER_MODEL_CPU_PANEL_KERNELS_H_

// The innermost matrix kernels, one set per instruction-set path. Each file that defines them is compiled
// with its own -m flags (worker/CMakeLists.txt); callers pick one at run time (panel_matmul.cc), so nothing
// here may include headers that would inline code compiled for one path into another.
//
// Weights are packed in panels of kPanelWidth output columns (packed_weight.h). A kernel computes, for one
// panel, out[m][c] = sum_k a[m][k] * W[panel column c][k] in float32, for every row m < rows.
#include <algorithm>
#include <cstdint>

namespace llmc::model::cpu {

constexpr int64_t kPanelWidth = 64;
// K is padded with zeros to a multiple of this (one AMX tile's depth in bfloat16).
constexpr int64_t kDepthAlign = 32;
// Activation buffers hold a multiple of this many rows (zeros past the real ones): an AMX tile is 16 rows.
constexpr int64_t kRowAlign = 16;

struct PanelArgs {
  const void* a;     // [rows rounded up to kRowAlign][a_stride], same element type as the weights
  int64_t a_stride;  // elements between rows, >= k_padded
  int64_t rows;
  int64_t k_padded;
  const void* panel;   // bfloat16: [k_padded / 2][kPanelWidth][2]; float32: [k_padded][kPanelWidth]
  float* out;          // [rows rounded up to kRowAlign][out_stride]
  int64_t out_stride;  // floats, >= kPanelWidth
};

// int8 weights (packed_weight.h, int8_staging.h): the panel is [k_padded / 2][kPanelWidth][2] int8 and its scales
// [weight_groups][kPanelWidth] float32; the activations were quantized to int16 per row and per group of
// `group_pairs` k pairs, with one float scale each. Within a group the products are summed exactly in int32
// (|w| <= 128, and |a| <= 32767 over at most 256 pairs, or |a| <= 127 over at most kMaxInt8ActivationGroup
// inputs, int8_staging.h: no overflow); at the group's end the sum is scaled by
// the row's activation scale and the columns' weight scales (group min(g, weight_groups - 1)) and added in
// float32. So every path computes the same integer sums.
struct Int8PanelArgs {
  const int16_t* a;       // [rows rounded up to kRowAlign][a_stride]
  const float* a_scales;  // [rows rounded up to kRowAlign][groups]
  int64_t a_stride;       // elements between rows, >= k_padded
  int64_t rows;
  int64_t k_padded;
  int64_t group_pairs;  // k pairs per group; the last group ends at k_padded
  int64_t groups;       // ceil(k_padded / 2 / group_pairs)
  const int8_t* panel;
  const float* scales;
  int64_t weight_groups;  // 1 (one scale per column) or groups
  float* out;             // [rows rounded up to kRowAlign][out_stride]
  int64_t out_stride;
  // W8A8 (PanelW8A8Avx512 only): the activations as bytes, [rows rounded up to kRowAlign][a_stride], each
  // |a| <= 127, and 128 times each row's sum over each group, [rows rounded up to kRowAlign][groups].
  const int8_t* a8 = nullptr;
  const int32_t* a8_offsets = nullptr;
  // MXFP4 weights (PanelMxfp4Avx512 only): E8M0 exponents [weight_groups][kPanelWidth] in place of `scales`.
  const uint8_t* scale_exponents = nullptr;
  // PanelW8A8Amx and PanelW4A8Amx: `panel` already as the tiles' operand (AmxTilePanel), so that the row blocks
  // of one panel share it; null: each call builds it.
  const int8_t* amx_tile_panel = nullptr;
};

// One int8 panel ([pairs][kPanelWidth][2], scales [weight_groups][kPanelWidth], group_pairs k pairs per scale
// group) as the bfloat16 panel of the same layout, each value w * scale rounded to nearest even.
void DequantizePanelBf16Portable(const int8_t* panel, const float* scales, int64_t weight_groups, int64_t group_pairs,
                                 int64_t pairs, uint16_t* out);
void DequantizePanelBf16Avx512(const int8_t* panel, const float* scales, int64_t weight_groups, int64_t group_pairs,
                               int64_t pairs, uint16_t* out);

// QuantizeActivationRow (int8_staging.h) vectorized, from float32 or bfloat16 values: the same results.
void QuantizeActivationRowAvx512(const float* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                                 int16_t levels, int16_t* dst, float* scales);
void QuantizeActivationRowBf16Avx512(const uint16_t* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                                     int16_t levels, int16_t* dst, float* scales);
// NarrowActivationRow (int8_staging.h) vectorized: the same bytes and offsets.
void NarrowActivationRowAvx512(const int16_t* src, int64_t stride, int64_t group_size, int64_t groups,
                               bool int4_byte_order, int8_t* dst, int32_t* offsets);
void PanelInt8Portable(const Int8PanelArgs& args);
void PanelInt8Avx2(const Int8PanelArgs& args);
void PanelInt8Avx512(const Int8PanelArgs& args);  // needs AVX512-VNNI as well
// The same sums from activations that fit a byte (W8A8), four inputs per vpdpbusd: twice the products per
// instruction. Reads a8 and a8_offsets instead of a.
void PanelW8A8Avx512(const Int8PanelArgs& args);
// Inputs per tdpbssd step of PanelW8A8Amx: the depth of an A tile row in bytes.
constexpr int64_t kAmxInt8StepInputs = 64;
// The same sums on AMX-INT8 tiles, sixteen rows at a time. Needs group_pairs a multiple of 32 (64 inputs per
// tile step) and a8 rows of whole steps: a_stride >= k_padded rounded up to 64, zeros past k_padded.
void PanelW8A8Amx(const Int8PanelArgs& args);
// int4 weights (the panel below) on the same tiles, each nibble widened to a signed byte: the sums of PanelW8A8Amx
// with those weights, from activation bytes in the rows' own order (not W4A8's octet order).
void PanelW4A8Amx(const Int8PanelArgs& args);
// An int8 panel (int4: the int4 panel) as those kernels' tile operand, in the calling thread's buffer until its
// next call.
const int8_t* AmxTilePanel(const void* panel, int64_t k_padded, bool int4);
// An int4 panel requantized to int8 (int4_requantize.h: factors and offsets [weight_groups][kPanelWidth]) as
// PanelW8A8Amx's tile operand, in the calling thread's buffer until its next call: RequantizeInt4PanelPortable's
// values in the tiles' layout.
const int8_t* RequantizedInt4TilePanel(const uint8_t* panel, const float* factors, const int32_t* offsets,
                                       int64_t weight_groups, int64_t group_pairs, int64_t k_padded);
// Both look the values up per group and column: table[16 c + n] is column c's value of stored nibble n in group
// `group` (factors and offsets as above), filled with AVX512F. In a vector of sixteen columns' 32-bit words, byte b
// belongs to column b / 4, whose entry in a vpermi2b table pair of eight columns starts at
// kInt4RequantizeTableRows[b] = 16 * (b / 4 % 8).
void FillInt4RequantizeTableAvx512(const float* factors, const int32_t* offsets, int64_t group, int8_t* table);
extern const uint8_t kInt4RequantizeTableRows[64];
// The same values in the W8A8 kernels' layout ([k_padded / 2][kPanelWidth][2], PanelW8A8Avx512's panel), into
// `values`. Needs AVX512_VBMI as well.
void RequantizeInt4PanelPairsAvx512(const uint8_t* panel, const float* factors, const int32_t* offsets,
                                    int64_t weight_groups, int64_t group_pairs, int64_t k_padded, int8_t* values);

// int4 weights (W4A16, int4_weight.h): the panel is [k_padded / 8][kPanelWidth][4] bytes, one 32-bit word per
// column holding 8 signed (two's complement) 4-bit weights of k = 8o..8o+7: bits 4j..4j+3 hold k = 8o + 2j and
// bits 16 + 4j..16 + 4j + 3 hold k = 8o + 2j + 1 (j = 0..3), so shifting each 16-bit half left by 12 - 4j and
// arithmetically right by 12 gives the int16 pair of k pair 4o + j in the int8 kernels' order. Scales and the
// int16 activations are as for int8 (Int8PanelArgs; `panel` points at the int4 bytes, group_pairs a multiple of
// 4); every path computes the same int32 sums.
// The nibble (0..7) of a column's 32-bit word that holds input r (0..7) of its k octet, in the layout above.
inline int Int4NibblePosition(int64_t r) { return r % 2 == 0 ? static_cast<int>(r / 2) : static_cast<int>(4 + r / 2); }
void PanelInt4Portable(const Int8PanelArgs& args);
void PanelInt4Avx2(const Int8PanelArgs& args);
void PanelInt4Avx512(const Int8PanelArgs& args);  // needs AVX512-VNNI as well
// W4A8: the same int4 panel against activations staged as bytes (a8, a8_offsets as for W8A8) with each k
// octet's bytes in the order 0, 4, 1, 5, 2, 6, 3, 7 (NarrowActivationRow's int4 byte order), two vpdpbusd per octet
// and row.
void PanelW4A8Avx512(const Int8PanelArgs& args);
// MXFP4 (mxfp4_weight.h): int4's panels and W4A8's byte activations, each nibble looked up as 2 * E2M1 and each
// group scaled by its exponents (scale_exponents) over 2.
void PanelMxfp4Avx512(const Int8PanelArgs& args);
// The three 4-bit kernels above with their weight prefetches stopping at L2 (cpu_isa.h, WeightPrefetch): the
// same sums.
void PanelInt4Avx512PrefetchL2(const Int8PanelArgs& args);
void PanelW4A8Avx512PrefetchL2(const Int8PanelArgs& args);
void PanelMxfp4Avx512PrefetchL2(const Int8PanelArgs& args);
// One int4 panel as the bfloat16 panel ([pairs][kPanelWidth][2]) of its values (plus their groups' zero offsets,
// 8 - z, when `zero_offsets` is not null) times their scales, rounded to nearest even (the prefill path).
void DequantizeInt4PanelBf16Portable(const uint8_t* panel, const float* scales, const float* zero_offsets,
                                     int64_t weight_groups, int64_t group_pairs, int64_t pairs, uint16_t* out);
void DequantizeInt4PanelBf16Avx512(const uint8_t* panel, const float* scales, const float* zero_offsets,
                                   int64_t weight_groups, int64_t group_pairs, int64_t pairs, uint16_t* out);

// int4's nibble of x at the rounding scale 1 / inverse: clamp(round(x * inverse), -8, 7), rounding half to even as
// torch.round does (adding 1.5 * 2^52 leaves no fraction bits; clamped first, so far below 2^51).
inline double Int4Nibble(double x, double inverse) {
  constexpr double kShift = 6755399441055744.0;
  const double v = std::clamp(x * inverse, -9.0, 8.0);
  return std::clamp((v + kShift) - kShift, -8.0, 7.0);
}

// int4's scale search (QuantizeInt4): sums[0] = sum(x q), sums[1] = sum(q^2) over `count` doubles (a multiple of
// 32), q = Int4Nibble(x, inverse). Each product is exact, and so are the sums in any order (int4_weight.cc says
// why), so every path gives the same bits.
void SumInt4NibblesPortable(const double* x, int64_t count, double inverse, double* sums);
void SumInt4NibblesAvx2(const double* x, int64_t count, double inverse, double* sums);
void SumInt4NibblesAvx512(const double* x, int64_t count, double inverse, double* sums);

void PanelBf16Portable(const PanelArgs& args);
void PanelFloatPortable(const PanelArgs& args);
void PanelBf16Avx2(const PanelArgs& args);
void PanelFloatAvx2(const PanelArgs& args);
void PanelBf16Avx512(const PanelArgs& args);
void PanelFloatAvx512(const PanelArgs& args);
void PanelBf16Amx(const PanelArgs& args);

// out[j] = SiLU(gate[j]) * up[j], vectorized for each path (vector_math.h).
void SiluMulPortable(const float* gate, const float* up, float* out, int64_t count);
void SiluMulAvx2(const float* gate, const float* up, float* out, int64_t count);
void SiluMulAvx512(const float* gate, const float* up, float* out, int64_t count);
// out = GELU(gate) * up, GELU's tanh form (vector_math.h: GeluTanhMul).
void GeluTanhMulPortable(const float* gate, const float* up, float* out, int64_t count);
void GeluTanhMulAvx2(const float* gate, const float* up, float* out, int64_t count);
void GeluTanhMulAvx512(const float* gate, const float* up, float* out, int64_t count);

// A row of float results stored as bfloat16, and a residual row's add stored as bfloat16, each rounded as
// c10::BFloat16 rounds (vector_math.h: RoundRowToBf16, AddRowToBf16): the epilogues of prefill-sized batches.
void RoundRowToBf16Portable(const float* src, uint16_t* dst, int64_t count);
void RoundRowToBf16Avx2(const float* src, uint16_t* dst, int64_t count);
void RoundRowToBf16Avx512(const float* src, uint16_t* dst, int64_t count);
void AddRowToBf16Portable(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count);
void AddRowToBf16Avx2(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count);
void AddRowToBf16Avx512(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count);

// Decode and short-chunk attention for one sequence and one KV head over its paged context (attention_kernel.h
// has the contract); one instantiation per path.
struct AttentionArgs;
void AttendPortable(const AttentionArgs& args);
void AttendAvx2(const AttentionArgs& args);
void AttendAvx512(const AttentionArgs& args);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_PANEL_KERNELS_H_
