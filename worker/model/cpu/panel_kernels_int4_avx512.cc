// Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (worker/CMakeLists.txt); called only where the CPU has
// them (cpu_isa.h: the avx512_vnni path and above). The dequantization to bfloat16 panels alone needs AVX512_BF16,
// as its target attribute says, and runs only on the avx512_bf16 path and above; the requantization to int8 panels
// needs AVX512_VBMI, as its own says.
//
// W4A16 decode: a k octet of the 64 columns is 256 bytes, four vectors of 16 columns x 8 weights. Each vector
// gives the int16 pairs of its four k pairs with one or two 16-bit shifts each (vpsllw, vpsraw: no shuffles,
// no table), made once and multiplied with vpdpwssd into every row of the block: 7 shifts per 64 bytes, shared
// by up to six rows, against 4 dot products per row.
#include <algorithm>

#include "worker/model/cpu/octet_prefetch.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/row_blocks.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

// GCC's own vector type keeps the sums in registers (see panel_kernels_int8_avx512.cc).
typedef int Int32x16 __attribute__((vector_size(64)));

inline Int32x16 DotPairs(Int32x16 acc, __m512i x, __m512i w) {
#if defined(__clang__)
  return reinterpret_cast<Int32x16>(_mm512_dpwssd_epi32(reinterpret_cast<__m512i>(acc), x, w));
#else
  return __builtin_ia32_vpdpwssd_v16si(acc, reinterpret_cast<Int32x16>(x), reinterpret_cast<Int32x16>(w));
#endif
}

// The int16 pairs of k pair j (0..3) of an octet: the signed nibbles at bits 4j of each 16-bit half.
template <int J>
inline __m512i Extract(__m512i raw) {
  if constexpr (J == 3) {
    return _mm512_srai_epi16(raw, 12);
  } else {
    return _mm512_srai_epi16(_mm512_slli_epi16(raw, 12 - 4 * J), 12);
  }
}

inline void AddScaledSums(float* out, __m512i sums, const float* w_scales, __m512 a_scale, bool first_group) {
  const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(w_scales), a_scale);
  const __m512 before = first_group ? _mm512_setzero_ps() : _mm512_loadu_ps(out);
  _mm512_storeu_ps(out, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, before));
}

template <int Rows, int J>
inline void DotRows(Int32x16 (&sum)[Rows][4], int i, __m512i w, const int32_t (&x)[Rows][4]) {
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) sum[r][i] = DotPairs(sum[r][i], _mm512_set1_epi32(x[r][J]), w);
}

// Rows rows against the octets of group g, the sums in registers; at the group's end scaled into the float
// output rows (in L1). The weights are prefetched 4 KiB ahead at kLocality.
template <int kLocality, int Rows>
void Int4GroupRows(const Int8PanelArgs& args, int64_t m0, int64_t g) {
  const int16_t* a = args.a + m0 * args.a_stride;
  const auto* panel = reinterpret_cast<const uint8_t*>(args.panel);
  Int32x16 sum[Rows][4];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) sum[r][i] = Int32x16{};
  }
  const int64_t group_octets = args.group_pairs / 4;
  const int64_t last = std::min(args.k_padded / 8, (g + 1) * group_octets);
  for (int64_t o = g * group_octets; o < last; ++o) {
    const uint8_t* w = panel + o * kPanelWidth * 4;
    PrefetchOctetAhead<kLocality>(w, 4096);
    int32_t x[Rows][4];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) __builtin_memcpy(x[r], a + r * args.a_stride + 8 * o, sizeof(x[r]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i raw = _mm512_loadu_si512(w + 64 * i);
      DotRows<Rows, 0>(sum, i, Extract<0>(raw), x);
      DotRows<Rows, 1>(sum, i, Extract<1>(raw), x);
      DotRows<Rows, 2>(sum, i, Extract<2>(raw), x);
      DotRows<Rows, 3>(sum, i, Extract<3>(raw), x);
    }
  }
  const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
  float* out = args.out + m0 * args.out_stride;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    const __m512 a_scale = _mm512_set1_ps(args.a_scales[(m0 + r) * args.groups + g]);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      AddScaledSums(out + r * args.out_stride + 16 * i, reinterpret_cast<__m512i>(sum[r][i]), w_scales + 16 * i,
                    a_scale, g == 0);
    }
  }
}

template <int kLocality>
struct Int4Runner {
  template <int Rows>
  struct ForRows {
    static void Run(const Int8PanelArgs& args, int64_t m0) {
      for (int64_t g = 0; g < args.groups; ++g) Int4GroupRows<kLocality, Rows>(args, m0, g);
    }
  };
};

}  // namespace

void PanelInt4Avx512(const Int8PanelArgs& args) { ForRowBlocks<Int4Runner<kPrefetchIntoL1>::ForRows>(args); }

void PanelInt4Avx512PrefetchL2(const Int8PanelArgs& args) { ForRowBlocks<Int4Runner<kPrefetchIntoL2>::ForRows>(args); }

namespace {

// Sixteen columns' octet at a time: four k pairs, each as two float vectors (even and odd k), rounded to bfloat16
// together and interleaved into the pairs of the plain layout. Adding the zero offsets (small integers) to the
// nibbles is exact, so the values are rounded once, as the portable path rounds them.
template <bool kZeroOffsets>
__attribute__((target("avx512bf16"))) void DequantizeInt4Octets(const uint8_t* panel, const float* scales,
                                                                const float* zero_offsets, int64_t weight_groups,
                                                                int64_t group_pairs, int64_t pairs, uint16_t* out) {
  // vcvtne2ps2bf16 puts the even k's 16 values below the odd k's; bfloat16 i of each pair comes from i / 2 of
  // the even ones (i even) or of the odd ones.
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (int64_t o = 0; o < pairs / 4; ++o) {
    const int64_t group_at = std::min(o * 4 / group_pairs, weight_groups - 1) * kPanelWidth;
    const uint8_t* w = panel + o * kPanelWidth * 4;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i raw = _mm512_loadu_si512(w + 64 * i);
      const __m512 scale = _mm512_loadu_ps(scales + group_at + 16 * i);
      const __m512i pair_values[4] = {Extract<0>(raw), Extract<1>(raw), Extract<2>(raw), Extract<3>(raw)};
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // Each 32-bit lane holds (even k, odd k) as int16: sign-extend both halves to float.
        __m512 even = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(pair_values[j], 16), 16));
        __m512 odd = _mm512_cvtepi32_ps(_mm512_srai_epi32(pair_values[j], 16));
        if constexpr (kZeroOffsets) {
          const __m512 offset = _mm512_loadu_ps(zero_offsets + group_at + 16 * i);
          even = _mm512_add_ps(even, offset);
          odd = _mm512_add_ps(odd, offset);
        }
        const __m512bh rounded = _mm512_cvtne2ps_pbh(_mm512_mul_ps(odd, scale), _mm512_mul_ps(even, scale));
        _mm512_storeu_si512(out + ((4 * o + j) * kPanelWidth + 16 * i) * 2,
                            _mm512_permutexvar_epi16(interleave, reinterpret_cast<const __m512i&>(rounded)));
      }
    }
  }
}

}  // namespace

__attribute__((target("avx512bf16"))) void DequantizeInt4PanelBf16Avx512(const uint8_t* panel, const float* scales,
                                                                         const float* zero_offsets,
                                                                         int64_t weight_groups, int64_t group_pairs,
                                                                         int64_t pairs, uint16_t* out) {
  if (zero_offsets != nullptr) {
    DequantizeInt4Octets<true>(panel, scales, zero_offsets, weight_groups, group_pairs, pairs, out);
  } else {
    DequantizeInt4Octets<false>(panel, scales, zero_offsets, weight_groups, group_pairs, pairs, out);
  }
}

alignas(64) const uint8_t kInt4RequantizeTableRows[64] = {
    0,  0,  0,  0,  16, 16, 16,  16,  32,  32,  32, 32, 48, 48, 48, 48, 64,  64,  64,  64, 80, 80,
    80, 80, 96, 96, 96, 96, 112, 112, 112, 112, 0,  0,  0,  0,  16, 16, 16,  16,  32,  32, 32, 32,
    48, 48, 48, 48, 64, 64, 64,  64,  80,  80,  80, 80, 96, 96, 96, 96, 112, 112, 112, 112};

void FillInt4RequantizeTableAvx512(const float* factors, const int32_t* offsets, int64_t group, int8_t* table) {
  // The nibbles 0..15 as the signed values they store.
  const __m512i signed_nibbles = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  for (int64_t c = 0; c < kPanelWidth; ++c) {
    const int64_t at = group * kPanelWidth + c;
    const __m512i unscaled = _mm512_add_epi32(signed_nibbles, _mm512_set1_epi32(offsets[at]));
    const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(unscaled), _mm512_set1_ps(factors[at]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(table + 16 * c), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(scaled)));
  }
}

// RequantizeInt4PanelPortable's values in the W8A8 kernels' layout. Each group's sixteen possible values of each
// column are computed once (FillInt4RequantizeTableAvx512) into a table that the stored nibbles index (vpermi2b,
// eight columns a table pair, as RequantizedInt4TilePanel looks them up). Within each 32-bit word the nibbles masked
// off the low halves of its bytes are k 0, 4, 1, 5 of the octet and those of the high halves k 2, 6, 3, 7: bytes 0, 2,
// 1, 3 of each make k pairs 0 and 2, and 1 and 3, whose 16-bit halves go out a pair at a time.
__attribute__((target("avx512vbmi"))) void RequantizeInt4PanelPairsAvx512(const uint8_t* panel, const float* factors,
                                                                          const int32_t* offsets, int64_t weight_groups,
                                                                          int64_t group_pairs, int64_t k_padded,
                                                                          int8_t* values) {
  const int64_t octets = k_padded / 8;
  const __m512i even_bytes_first =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i table_rows = _mm512_loadu_si512(kInt4RequantizeTableRows);
  alignas(64) int8_t table[kPanelWidth * 16];
  int64_t group = -1;
  for (int64_t o = 0; o < octets; ++o) {
    const int64_t g = std::min(4 * o / group_pairs, weight_groups - 1);
    if (g != group) {
      group = g;
      FillInt4RequantizeTableAvx512(factors, offsets, g, table);
    }
    int8_t* out = values + o * 4 * 2 * kPanelWidth;
    for (int i = 0; i < 4; ++i) {  // 16 columns at a time
      const __m512i raw = _mm512_loadu_si512(panel + o * kPanelWidth * 4 + 64 * i);
      const __m512i first_and_third = _mm512_shuffle_epi8(_mm512_and_si512(raw, nibble), even_bytes_first);
      const __m512i second_and_fourth =
          _mm512_shuffle_epi8(_mm512_and_si512(_mm512_srli_epi32(raw, 4), nibble), even_bytes_first);
      const int8_t* columns = table + 16 * 16 * i;
      const __m512i first_a = _mm512_load_si512(columns), first_b = _mm512_load_si512(columns + 64);
      const __m512i second_a = _mm512_load_si512(columns + 128), second_b = _mm512_load_si512(columns + 192);
      const __m512i low_index = _mm512_or_si512(first_and_third, table_rows);
      const __m512i high_index = _mm512_or_si512(second_and_fourth, table_rows);
      const __m512i low =
          _mm512_mask_blend_epi8(0xffffffff00000000ull, _mm512_permutex2var_epi8(first_a, low_index, first_b),
                                 _mm512_permutex2var_epi8(second_a, low_index, second_b));
      const __m512i high =
          _mm512_mask_blend_epi8(0xffffffff00000000ull, _mm512_permutex2var_epi8(first_a, high_index, first_b),
                                 _mm512_permutex2var_epi8(second_a, high_index, second_b));
      // k pair j of the octet: 32 bytes of [16 columns][2].
      const auto store_pair = [&](int j, __m512i words) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * 2 * kPanelWidth + 32 * i),
                            _mm512_cvtepi32_epi16(words));
      };
      store_pair(0, low);
      store_pair(1, high);
      store_pair(2, _mm512_srli_epi32(low, 16));
      store_pair(3, _mm512_srli_epi32(high, 16));
    }
  }
}

void SumInt4NibblesAvx512(const double* x, int64_t count, double inverse, double* sums) {
  const __m512d scale = _mm512_set1_pd(inverse), low = _mm512_set1_pd(-8.0), high = _mm512_set1_pd(7.0);
  __m512d xq[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()}, qq[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
  for (int64_t i = 0; i < count; i += 16) {
    for (int j = 0; j < 2; ++j) {
      const __m512d values = _mm512_loadu_pd(x + i + 8 * j);
      const __m512d rounded =
          _mm512_roundscale_pd(_mm512_mul_pd(values, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512d q = _mm512_min_pd(_mm512_max_pd(rounded, low), high);
      xq[j] = _mm512_fmadd_pd(values, q, xq[j]);  // the product is exact: one rounding either way
      qq[j] = _mm512_fmadd_pd(q, q, qq[j]);
    }
  }
  sums[0] = _mm512_reduce_add_pd(_mm512_add_pd(xq[0], xq[1]));
  sums[1] = _mm512_reduce_add_pd(_mm512_add_pd(qq[0], qq[1]));
}

}  // namespace llmc::model::cpu
