// Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512bf16 (worker/CMakeLists.txt); called only where the
// CPU has them (HasByteActivationKernel).
//
// MXFP4 weights (mxfp4_weight.h) against activations staged as bytes, as W4A8 (panel_kernels_w4a8_avx512.cc) runs
// int4: the same panels, octet order and two vpdpbusd per octet and row. Instead of offsetting each nibble by 8,
// one vpshufb per vector looks every nibble up in a table of 2 * E2M1 + 12 (0..24, what vpdpbusd's unsigned
// operand needs); the group's 12 x sum of activations comes off at the end, and each column's E8M0 exponent
// becomes its float scale 2^(e - 127) by a shift into the exponent field (e = 0: 2^-127, a subnormal).
#include <algorithm>

#include "worker/model/cpu/mxfp4_weight.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/row_blocks.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

// GCC's own vector type keeps the sums in registers (see panel_kernels_int8_avx512.cc).
typedef int Int32x16 __attribute__((vector_size(64)));

constexpr int kValueOffset = 12;

inline Int32x16 DotQuads(Int32x16 acc, __m512i w_unsigned, __m512i x) {
#if defined(__clang__)
  return reinterpret_cast<Int32x16>(_mm512_dpbusd_epi32(reinterpret_cast<__m512i>(acc), w_unsigned, x));
#else
  return __builtin_ia32_vpdpbusd_v16si(acc, reinterpret_cast<Int32x16>(w_unsigned), reinterpret_cast<Int32x16>(x));
#endif
}

// The table of packed nibble -> 2 * value + 12, in each 128-bit lane (vpshufb looks up within lanes).
inline __m512i OffsetValueTable() {
  alignas(16) int8_t lane[16];
  for (int i = 0; i < 16; ++i) lane[i] = static_cast<int8_t>(kMxfp4DoubledValues[i] + kValueOffset);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(lane)));
}

// 16 columns' exponents as float scales 2^(e - 127).
inline __m512 ExponentScales(const uint8_t* exponents) {
  const __m512i bits =
      _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(exponents))), 23);
  return _mm512_castsi512_ps(_mm512_max_epi32(bits, _mm512_set1_epi32(0x00400000)));
}

template <int Rows>
void Mxfp4GroupRows(const Int8PanelArgs& args, __m512i table, int64_t m0, int64_t g) {
  const int8_t* a = args.a8 + m0 * args.a_stride;
  const auto* panel = reinterpret_cast<const uint8_t*>(args.panel);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
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
    // 4 KiB ahead, every line of the octet (AMD parts have no adjacent-line prefetcher).
#pragma GCC unroll 4
    for (int line = 0; line < 4; ++line) _mm_prefetch(reinterpret_cast<const char*>(w) + 4096 + 64 * line, _MM_HINT_T0);
    int32_t x[Rows][2];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) __builtin_memcpy(x[r], a + r * args.a_stride + 8 * o, sizeof(x[r]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i raw = _mm512_loadu_si512(w + 64 * i);
      const __m512i first = _mm512_shuffle_epi8(table, _mm512_and_si512(raw, low_nibbles));
      const __m512i second = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi32(raw, 4), low_nibbles));
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        sum[r][i] = DotQuads(sum[r][i], first, _mm512_set1_epi32(x[r][0]));
        sum[r][i] = DotQuads(sum[r][i], second, _mm512_set1_epi32(x[r][1]));
      }
    }
  }
  const uint8_t* w_exponents = args.scale_exponents + std::min(g, args.weight_groups - 1) * kPanelWidth;
  const __m512 w_scales[4] = {ExponentScales(w_exponents), ExponentScales(w_exponents + 16),
                              ExponentScales(w_exponents + 32), ExponentScales(w_exponents + 48)};
  float* out = args.out + m0 * args.out_stride;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    // The table's values are doubled: half the activation scale.
    const __m512 a_scale = _mm512_set1_ps(0.5f * args.a_scales[(m0 + r) * args.groups + g]);
    // The offsets are 128 x the group's sum; the weights came in as 2 * value + 12.
    const __m512i offset = _mm512_set1_epi32(args.a8_offsets[(m0 + r) * args.groups + g] / 128 * kValueOffset);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i sums = _mm512_sub_epi32(reinterpret_cast<__m512i>(sum[r][i]), offset);
      const __m512 scale = _mm512_mul_ps(w_scales[i], a_scale);
      float* dst = out + r * args.out_stride + 16 * i;
      const __m512 before = g == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(dst);
      _mm512_storeu_ps(dst, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, before));
    }
  }
}

template <int Rows>
struct Mxfp4Runner {
  static void Run(const Int8PanelArgs& args, int64_t m0) {
    const __m512i table = OffsetValueTable();
    for (int64_t g = 0; g < args.groups; ++g) Mxfp4GroupRows<Rows>(args, table, m0, g);
  }
};

}  // namespace

void PanelMxfp4Avx512(const Int8PanelArgs& args) { ForRowBlocks<Mxfp4Runner>(args); }

}  // namespace llmc::model::cpu
