// Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512bf16 (worker/CMakeLists.txt); called only where the
// CPU has them (HasByteActivationKernel).
//
// W4A8: int4 weights against activations quantized to bytes, four products per lane and vpdpbusd, twice
// W4A16's products per instruction and about half its unpacking. A k octet of 16 columns is one vector of 32-bit
// words (int4_weight.h: bits 4j hold k = 2j, bits 16 + 4j hold k = 2j + 1, two's complement). XOR 0x8 per nibble
// makes each weight w + 8 in 0..15 (what vpdpbusd's unsigned operand needs); masking the low nibbles of every
// byte gives the lanes' bytes k = 0, 4, 1, 5 and shifting by 4 first gives k = 2, 6, 3, 7. The activation bytes
// come in that order (OrderInt4ActivationBytes), so two vpdpbusd per row take the octet, and the group's
// 8 x sum of activations (args.a8_offsets / 16) comes off at the end.
#include <algorithm>

#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/row_blocks.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

// GCC's own vector type keeps the sums in registers (see panel_kernels_int8_avx512.cc).
typedef int Int32x16 __attribute__((vector_size(64)));

inline Int32x16 DotQuads(Int32x16 acc, __m512i w_unsigned, __m512i x) {
#if defined(__clang__)
  return reinterpret_cast<Int32x16>(_mm512_dpbusd_epi32(reinterpret_cast<__m512i>(acc), w_unsigned, x));
#else
  return __builtin_ia32_vpdpbusd_v16si(acc, reinterpret_cast<Int32x16>(w_unsigned), reinterpret_cast<Int32x16>(x));
#endif
}

template <int Rows>
void W4A8GroupRows(const Int8PanelArgs& args, int64_t m0, int64_t g) {
  const int8_t* a = args.a8 + m0 * args.a_stride;
  const auto* panel = reinterpret_cast<const uint8_t*>(args.panel);
  const __m512i offset_binary = _mm512_set1_epi8(static_cast<char>(0x88));
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
      const __m512i raw = _mm512_xor_si512(_mm512_loadu_si512(w + 64 * i), offset_binary);
      const __m512i first = _mm512_and_si512(raw, low_nibbles);
      const __m512i second = _mm512_and_si512(_mm512_srli_epi32(raw, 4), low_nibbles);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        sum[r][i] = DotQuads(sum[r][i], first, _mm512_set1_epi32(x[r][0]));
        sum[r][i] = DotQuads(sum[r][i], second, _mm512_set1_epi32(x[r][1]));
      }
    }
  }
  const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
  float* out = args.out + m0 * args.out_stride;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    const __m512 a_scale = _mm512_set1_ps(args.a_scales[(m0 + r) * args.groups + g]);
    // The offsets are 128 x the group's sum; the weights came in as w + 8.
    const __m512i offset = _mm512_set1_epi32(args.a8_offsets[(m0 + r) * args.groups + g] / 16);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i sums = _mm512_sub_epi32(reinterpret_cast<__m512i>(sum[r][i]), offset);
      const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(w_scales + 16 * i), a_scale);
      float* dst = out + r * args.out_stride + 16 * i;
      const __m512 before = g == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(dst);
      _mm512_storeu_ps(dst, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, before));
    }
  }
}

template <int Rows>
struct W4A8Runner {
  static void Run(const Int8PanelArgs& args, int64_t m0) {
    for (int64_t g = 0; g < args.groups; ++g) W4A8GroupRows<Rows>(args, m0, g);
  }
};

}  // namespace

void PanelW4A8Avx512(const Int8PanelArgs& args) { ForRowBlocks<W4A8Runner>(args); }

}  // namespace llmc::model::cpu
