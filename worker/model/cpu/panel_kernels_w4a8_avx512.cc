// Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (worker/CMakeLists.txt); called only where the CPU has
// them (HasByteActivationKernel: the avx512_vnni path and above).
//
// 4-bit weights against activations quantized to bytes, four products per lane and vpdpbusd: int4 (W4A8, twice
// W4A16's products per instruction and about half its unpacking) and MXFP4 (mxfp4_weight.h), which share int4's
// panels. A k octet of 16 columns is one vector of 32-bit words (int4_weight.h: bits 4j hold k = 2j, bits 16 + 4j
// hold k = 2j + 1). Masking the low nibbles of every byte gives the lanes' bytes k = 0, 4, 1, 5 and shifting by 4
// first gives k = 2, 6, 3, 7; the activation bytes come in that order (NarrowActivationRow), so two vpdpbusd
// per row take the octet. vpdpbusd's weight operand is unsigned, so each format turns a nibble into its value plus
// an offset (int4: XOR 0x8 makes w + 8; MXFP4: one vpshufb looks it up as 2 * E2M1 + 12), and the group's offset x
// sum of activations (args.a8_offsets hold 128 x the sum) comes off at the end.
#include <algorithm>

#include "worker/model/cpu/mxfp4_weight.h"
#include "worker/model/cpu/octet_prefetch.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/row_blocks.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

// GCC's own vector type keeps the sums in registers (see panel_kernels_int8_avx512.cc).
typedef int Int32x16 __attribute__((vector_size(64)));

// vpdpbusd with the activation word broadcast from memory inside the instruction ({1to16}). Broadcasts written as
// intrinsics are shared by the four vectors of an octet, and GCC then keeps six rows' twelve of them in registers
// beside the 24 sums and spills sums to the stack in the inner loop; from memory they take none.
inline Int32x16 DotQuadsBroadcast(Int32x16 acc, __m512i w_unsigned, const int8_t* x) {
  // The memory operand as the four bytes it reads (no alignment or aliasing assumed).
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w_unsigned), "m"(*reinterpret_cast<const int8_t(*)[4]>(x)));
  return acc;
}

inline __m512i LowNibbles(__m512i bytes) { return _mm512_and_si512(bytes, _mm512_set1_epi8(0x0f)); }
inline __m512i HighNibbles(__m512i bytes) { return LowNibbles(_mm512_srli_epi32(bytes, 4)); }

// Each format: Bytes(raw, low, high) gives the low and the high nibbles of a vector as value + kOffset, Scales
// the float weight scales of 16 columns of a group; its values times kActivationScale are the weights over scale.

// int4: two's complement nibbles, float32 scales.
struct Int4Values {
  static constexpr int kOffset = 8;
  static constexpr float kActivationScale = 1.0f;
  const __m512i offset_binary = _mm512_set1_epi8(static_cast<char>(0x88));

  void Bytes(__m512i raw, __m512i& low, __m512i& high) const {
    const __m512i offset = _mm512_xor_si512(raw, offset_binary);
    low = LowNibbles(offset);
    high = HighNibbles(offset);
  }
  static __m512 Scales(const Int8PanelArgs& args, int64_t group, int i) {
    return _mm512_loadu_ps(args.scales + group * kPanelWidth + 16 * i);
  }
};

// MXFP4: E2M1 codes stored as code ^ 8, looked up as twice their value; E8M0 exponent bytes as the scales, the
// doubling taken back from the activation scale.
struct Mxfp4Values {
  static constexpr int kOffset = 12;
  static constexpr float kActivationScale = 0.5f;
  // vpshufb looks up within 128-bit lanes: the table in each.
  const __m512i table = [] {
    alignas(16) int8_t lane[16];
    for (int i = 0; i < 16; ++i) lane[i] = static_cast<int8_t>(kMxfp4DoubledValues[i] + kOffset);
    return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(lane)));
  }();

  void Bytes(__m512i raw, __m512i& low, __m512i& high) const {
    low = _mm512_shuffle_epi8(table, LowNibbles(raw));
    high = _mm512_shuffle_epi8(table, HighNibbles(raw));
  }
  // 16 columns' exponents as 2^(e - 127): e shifted into the exponent field (e = 0: 2^-127, a subnormal).
  static __m512 Scales(const Int8PanelArgs& args, int64_t group, int i) {
    const __m128i exponents =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(args.scale_exponents + group * kPanelWidth + 16 * i));
    const __m512i bits = _mm512_slli_epi32(_mm512_cvtepu8_epi32(exponents), 23);
    return _mm512_castsi512_ps(_mm512_max_epi32(bits, _mm512_set1_epi32(0x00400000)));
  }
};

template <typename Values, int kLocality, int Rows>
void GroupRows(const Int8PanelArgs& args, const Values& values, int64_t m0, int64_t g) {
  const int8_t* a = args.a8 + m0 * args.a_stride;
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
    // 8 KiB ahead. This kernel asks for lines about twice as fast as W4A16: at the 4 KiB the other kernels use,
    // its one-row step ran 2 % behind W4A16's when the machine's memory was slow, at 8 KiB within 1 % (AMD Zen 4,
    // 2026-11-30). The int8 kernel's step lost 2-3 % at 8 KiB.
    PrefetchOctetAhead<kLocality>(w, 8192);
    const int8_t* x = a + 8 * o;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i raw = _mm512_loadu_si512(w + 64 * i);
      __m512i first, second;
      values.Bytes(raw, first, second);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        sum[r][i] = DotQuadsBroadcast(sum[r][i], first, x + r * args.a_stride);
        sum[r][i] = DotQuadsBroadcast(sum[r][i], second, x + r * args.a_stride + 4);
      }
    }
  }
  const int64_t weight_group = std::min(g, args.weight_groups - 1);
  const __m512 w_scales[4] = {Values::Scales(args, weight_group, 0), Values::Scales(args, weight_group, 1),
                              Values::Scales(args, weight_group, 2), Values::Scales(args, weight_group, 3)};
  float* out = args.out + m0 * args.out_stride;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    const __m512 a_scale = _mm512_set1_ps(Values::kActivationScale * args.a_scales[(m0 + r) * args.groups + g]);
    // The weights came in as value + kOffset.
    const __m512i offset = _mm512_set1_epi32(args.a8_offsets[(m0 + r) * args.groups + g] / 128 * Values::kOffset);
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

template <typename Values, int kLocality>
struct Runner {
  template <int Rows>
  struct ForRows {
    static void Run(const Int8PanelArgs& args, int64_t m0) {
      const Values values;
      for (int64_t g = 0; g < args.groups; ++g) GroupRows<Values, kLocality, Rows>(args, values, m0, g);
    }
  };
};

}  // namespace

void PanelW4A8Avx512(const Int8PanelArgs& args) { ForRowBlocks<Runner<Int4Values, kPrefetchIntoL1>::ForRows>(args); }

void PanelW4A8Avx512PrefetchL2(const Int8PanelArgs& args) {
  ForRowBlocks<Runner<Int4Values, kPrefetchIntoL2>::ForRows>(args);
}

void PanelMxfp4Avx512(const Int8PanelArgs& args) { ForRowBlocks<Runner<Mxfp4Values, kPrefetchIntoL1>::ForRows>(args); }

void PanelMxfp4Avx512PrefetchL2(const Int8PanelArgs& args) {
  ForRowBlocks<Runner<Mxfp4Values, kPrefetchIntoL2>::ForRows>(args);
}

}  // namespace llmc::model::cpu
