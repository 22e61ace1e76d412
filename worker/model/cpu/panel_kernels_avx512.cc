// Built with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 (worker/CMakeLists.txt); called only where the CPU
// has them (cpu_isa.h).
#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/vector_math.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

// Software prefetch of the panel 4 KiB ahead, every 64-byte line of the 256 bytes one k step (a bfloat16
// pair, or one float32 k) reads. Prefetching only every other line relies on the CPU's adjacent-line
// prefetcher, which Intel parts have and AMD's do not: on an AMD EPYC the LM head streamed at 21 GB/s that
// way and at 37 GB/s with every line.
inline void PrefetchAhead(const void* position) {
  constexpr int kDistance = 4096;
  const char* line = static_cast<const char*>(position) + kDistance;
  _mm_prefetch(line, _MM_HINT_T0);
  _mm_prefetch(line + 64, _MM_HINT_T0);
  _mm_prefetch(line + 128, _MM_HINT_T0);
  _mm_prefetch(line + 192, _MM_HINT_T0);
}

// Rows rows against the whole panel: 4 column vectors x Rows accumulators; the panel streams in order and
// each 64-byte weight vector serves every row.
template <int Rows>
void Bf16Rows(const PanelArgs& args, int64_t m0) {
  const auto* panel = static_cast<const uint16_t*>(args.panel);
  const auto* a = static_cast<const uint16_t*>(args.a) + m0 * args.a_stride;
  __m512 acc[Rows][4];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  const int64_t pairs = args.k_padded / 2;
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const uint16_t* w = panel + pair * kPanelWidth * 2;
    PrefetchAhead(w);
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(w);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(w + 32);
    const __m512bh w2 = (__m512bh)_mm512_loadu_si512(w + 64);
    const __m512bh w3 = (__m512bh)_mm512_loadu_si512(w + 96);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      int32_t bits;
      __builtin_memcpy(&bits, a + r * args.a_stride + 2 * pair, sizeof(bits));
      const __m512bh x = (__m512bh)_mm512_set1_epi32(bits);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, w0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, w1);
      acc[r][2] = _mm512_dpbf16_ps(acc[r][2], x, w2);
      acc[r][3] = _mm512_dpbf16_ps(acc[r][3], x, w3);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    float* out = args.out + (m0 + r) * args.out_stride;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(out + 16 * j, acc[r][j]);
  }
}

template <int Rows>
void FloatRows(const PanelArgs& args, int64_t m0) {
  const auto* panel = static_cast<const float*>(args.panel);
  const auto* a = static_cast<const float*>(args.a) + m0 * args.a_stride;
  __m512 acc[Rows][4];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < args.k_padded; ++k) {
    const float* w = panel + k * kPanelWidth;
    PrefetchAhead(w);
    const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16), w2 = _mm512_loadu_ps(w + 32),
                 w3 = _mm512_loadu_ps(w + 48);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * args.a_stride + k]);
      acc[r][0] = _mm512_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(x, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(x, w3, acc[r][3]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    float* out = args.out + (m0 + r) * args.out_stride;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(out + 16 * j, acc[r][j]);
  }
}

// Six rows use 24 of the 32 vector registers for accumulators.
template <template <int> class Runner>
void ForRowBlocks(const PanelArgs& args) {
  int64_t m0 = 0;
  for (; m0 + 6 <= args.rows; m0 += 6) Runner<6>::Run(args, m0);
  switch (args.rows - m0) {
    case 5:
      Runner<5>::Run(args, m0);
      break;
    case 4:
      Runner<4>::Run(args, m0);
      break;
    case 3:
      Runner<3>::Run(args, m0);
      break;
    case 2:
      Runner<2>::Run(args, m0);
      break;
    case 1:
      Runner<1>::Run(args, m0);
      break;
    default:
      break;
  }
}

template <int Rows>
struct Bf16Runner {
  static void Run(const PanelArgs& args, int64_t m0) { Bf16Rows<Rows>(args, m0); }
};
template <int Rows>
struct FloatRunner {
  static void Run(const PanelArgs& args, int64_t m0) { FloatRows<Rows>(args, m0); }
};

}  // namespace

void PanelBf16Avx512(const PanelArgs& args) { ForRowBlocks<Bf16Runner>(args); }
void PanelFloatAvx512(const PanelArgs& args) { ForRowBlocks<FloatRunner>(args); }
void AttendAvx512(const AttentionArgs& args) { Attend(args); }
void SiluMulAvx512(const float* gate, const float* up, float* out, int64_t count) { SiluMul(gate, up, out, count); }

}  // namespace llmc::model::cpu
