// Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (worker/CMakeLists.txt); called only where the CPU has
// them (cpu_isa.h: the avx512_vnni path and above). The dequantization to bfloat16 panels alone needs AVX512_BF16,
// as its target attribute says, and runs only on the avx512_bf16 path and above.
#include <algorithm>

#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/row_blocks.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

// The panel 4 KiB ahead, both 64-byte lines of the 128 bytes one k pair of int8 weights takes (AMD parts
// have no adjacent-line prefetcher to fetch the second).
inline void PrefetchAhead(const int8_t* position) {
  _mm_prefetch(reinterpret_cast<const char*>(position) + 4096, _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(position) + 4096 + 64, _MM_HINT_T0);
}

// Sixteen int32 lanes as GCC's own vector type: an array of __m512i (64-bit lanes) that each
// _mm512_dpwssd_epi32 reinterprets as 32-bit lanes stays on the stack in GCC 12, spilled at every use.
typedef int Int32x16 __attribute__((vector_size(64)));
typedef short Int16x32 __attribute__((vector_size(64)));

// acc += x[2i] * w[2i] + x[2i + 1] * w[2i + 1] in each int32 lane i.
inline Int32x16 DotPairs(Int32x16 acc, __m512i x, __m512i w) {
#if defined(__clang__)  // clang keeps the intrinsic's vectors in registers (sanitizer and fuzzing builds)
  return reinterpret_cast<Int32x16>(_mm512_dpwssd_epi32(reinterpret_cast<__m512i>(acc), x, w));
#else
  return __builtin_ia32_vpdpwssd_v16si(acc, reinterpret_cast<Int32x16>(x), reinterpret_cast<Int32x16>(w));
#endif
}

// Both kernels' start: every accumulator at zero.
template <int Rows>
inline void ZeroSums(Int32x16 (&sum)[Rows][4]) {
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) sum[r][j] = Int32x16{};
  }
}

// Both kernels' end, for 16 columns of one row: out (+)= float(sums) * w_scales * a_scale, the first group
// storing rather than adding.
inline void AddScaledSums(float* out, __m512i sums, const float* w_scales, __m512 a_scale, bool first_group) {
  const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(w_scales), a_scale);
  const __m512 before = first_group ? _mm512_setzero_ps() : _mm512_loadu_ps(out);
  _mm512_storeu_ps(out, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, before));
}

// Rows rows against the k pairs of group g: 4 column vectors x Rows int32 sums; each k pair of 16 columns
// (32 bytes) is widened to int16 once and serves every row through vpdpwssd. At the end the sums are scaled
// and added to the float32 output rows, which stay in L1. One group per call keeps the 24 sums in registers
template <int Rows>
void Int8GroupRows(const Int8PanelArgs& args, int64_t m0, int64_t g) {
  const int16_t* a = args.a + m0 * args.a_stride;
  Int32x16 sum[Rows][4];
  ZeroSums<Rows>(sum);
  const int64_t last = std::min(args.k_padded / 2, (g + 1) * args.group_pairs);
  for (int64_t pair = g * args.group_pairs; pair < last; ++pair) {
    const int8_t* w = args.panel + pair * kPanelWidth * 2;
    PrefetchAhead(w);
    const __m512i w0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
    const __m512i w1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32)));
    const __m512i w2 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64)));
    const __m512i w3 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 96)));
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      int32_t bits;
      __builtin_memcpy(&bits, a + r * args.a_stride + 2 * pair, sizeof(bits));
      const __m512i x = _mm512_set1_epi32(bits);
      sum[r][0] = DotPairs(sum[r][0], x, w0);
      sum[r][1] = DotPairs(sum[r][1], x, w1);
      sum[r][2] = DotPairs(sum[r][2], x, w2);
      sum[r][3] = DotPairs(sum[r][3], x, w3);
    }
  }
  const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
  float* out = args.out + m0 * args.out_stride;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    const __m512 a_scale = _mm512_set1_ps(args.a_scales[(m0 + r) * args.groups + g]);
    float* row = out + r * args.out_stride;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      AddScaledSums(row + 16 * j, reinterpret_cast<__m512i>(sum[r][j]), w_scales + 16 * j, a_scale, g == 0);
    }
  }
}

template <int Rows>
struct Int8Runner {
  static void Run(const Int8PanelArgs& args, int64_t m0) {
    for (int64_t g = 0; g < args.groups; ++g) Int8GroupRows<Rows>(args, m0, g);
  }
};

// W8A8: acc += sum over four inputs of (unsigned) w[4i..4i+3] * (signed) x[4i..4i+3] in each int32 lane i.
inline Int32x16 DotQuads(Int32x16 acc, __m512i w_unsigned, __m512i x) {
#if defined(__clang__)
  return reinterpret_cast<Int32x16>(_mm512_dpbusd_epi32(reinterpret_cast<__m512i>(acc), w_unsigned, x));
#else
  return __builtin_ia32_vpdpbusd_v16si(acc, reinterpret_cast<Int32x16>(w_unsigned), reinterpret_cast<Int32x16>(x));
#endif
}

// vpdpbusd multiplies unsigned by signed bytes, so each weight goes in as w + 128 (its sign bit flipped) and
// the group's sum of activations times 128 (args.a8_offsets) comes off at the end. Two k pairs of 32 columns,
// interleaved 16 bits at a time, make two vectors of 16 columns x 4 inputs; within each 128-bit lane the low
// half holds columns 8L..8L+3, the high half 8L+4..8L+7. to_natural_* put the sums back in column order.
struct QuadVectors {
  __m512i w[4];
};

// The four vectors of k pairs `pair` and `pair + 1`, from the panel.
inline QuadVectors LoadQuads(const int8_t* panel, int64_t pair) {
  const __m512i sign_bits = _mm512_set1_epi8(static_cast<char>(0x80));
  const int8_t* w = panel + pair * kPanelWidth * 2;
  PrefetchAhead(w);
  PrefetchAhead(w + 2 * kPanelWidth);
  const __m512i first_low = _mm512_xor_si512(_mm512_loadu_si512(w), sign_bits);
  const __m512i first_high = _mm512_xor_si512(_mm512_loadu_si512(w + 64), sign_bits);
  const __m512i second_low = _mm512_xor_si512(_mm512_loadu_si512(w + 128), sign_bits);
  const __m512i second_high = _mm512_xor_si512(_mm512_loadu_si512(w + 192), sign_bits);
  return {{_mm512_unpacklo_epi16(first_low, second_low), _mm512_unpackhi_epi16(first_low, second_low),
           _mm512_unpacklo_epi16(first_high, second_high), _mm512_unpackhi_epi16(first_high, second_high)}};
}

template <int Rows>
void W8A8GroupRows(const Int8PanelArgs& args, int64_t m0, int64_t g) {
  const int8_t* a = args.a8 + m0 * args.a_stride;
  Int32x16 sum[Rows][4];
  ZeroSums<Rows>(sum);
  const int64_t first = g * args.group_pairs, last = std::min(args.k_padded / 2, first + args.group_pairs);
  for (int64_t pair = first; pair < last; pair += 2) {  // group_pairs and k_padded / 2 are even
    const QuadVectors w = LoadQuads(args.panel, pair);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      int32_t bits;
      __builtin_memcpy(&bits, a + r * args.a_stride + 2 * pair, sizeof(bits));
      const __m512i x = _mm512_set1_epi32(bits);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) sum[r][j] = DotQuads(sum[r][j], w.w[j], x);
    }
  }
  const __m512i to_natural_low = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i to_natural_high = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
  float* out = args.out + m0 * args.out_stride;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    const __m512 a_scale = _mm512_set1_ps(args.a_scales[(m0 + r) * args.groups + g]);
    const __m512i offset = _mm512_set1_epi32(args.a8_offsets[(m0 + r) * args.groups + g]);
    float* row = out + r * args.out_stride;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i first = reinterpret_cast<__m512i>(sum[r][j & 2]), second = reinterpret_cast<__m512i>(sum[r][j | 1]);
      const __m512i natural = _mm512_sub_epi32(
          _mm512_permutex2var_epi32(first, (j & 1) ? to_natural_high : to_natural_low, second), offset);
      AddScaledSums(row + 16 * j, natural, w_scales + 16 * j, a_scale, g == 0);
    }
  }
}

template <int Rows>
struct W8A8Runner {
  static void Run(const Int8PanelArgs& args, int64_t m0) {
    for (int64_t g = 0; g < args.groups; ++g) W8A8GroupRows<Rows>(args, m0, g);
  }
};

}  // namespace

__attribute__((target("avx512bf16"))) void DequantizePanelBf16Avx512(const int8_t* panel, const float* scales,
                                                                     int64_t weight_groups, int64_t group_pairs,
                                                                     int64_t pairs, uint16_t* out) {
  // Element j of a 16-value block holds column j / 2: each scale twice.
  const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  for (int64_t group_start = 0; group_start < pairs; group_start += group_pairs) {
    const float* column_scales = scales + std::min(group_start / group_pairs, weight_groups - 1) * kPanelWidth;
    __m512 block_scales[8];
    for (int b = 0; b < 8; ++b) {
      block_scales[b] = _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(_mm256_loadu_ps(column_scales + 8 * b)));
    }
    const int64_t group_end = std::min(pairs, group_start + group_pairs);
    for (int64_t pair = group_start; pair < group_end; ++pair) {
      const int8_t* src = panel + pair * 2 * kPanelWidth;
      uint16_t* dst = out + pair * 2 * kPanelWidth;
#pragma GCC unroll 8
      for (int b = 0; b < 8; ++b) {
        const __m512 values =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * b))));
        const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_mul_ps(values, block_scales[b]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16 * b), reinterpret_cast<const __m256i&>(rounded));
      }
    }
  }
}

void PanelInt8Avx512(const Int8PanelArgs& args) { ForRowBlocks<Int8Runner>(args); }
// The sign flips and interleaving are repeated for every block of six rows: made once per group into L1
// instead, the batch ran slower (measured on AMD Zen 4), as vpdpbusd, not they, sets the pace.
void PanelW8A8Avx512(const Int8PanelArgs& args) { ForRowBlocks<W8A8Runner>(args); }

}  // namespace llmc::model::cpu
