// Built with -mavx2 -mfma (worker/CMakeLists.txt); called only where the CPU has them (cpu_isa.h).
#include <algorithm>

#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/vector_math.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {

// One row at a time: eight 8-column accumulators cover the panel. A bfloat16 pair (k, k + 1) of 8 columns is
// one 32-byte load; shifting gives the even k, masking the odd one, both as float32.
void PanelBf16Avx2(const PanelArgs& args) {
  const auto* panel = static_cast<const uint16_t*>(args.panel);
  const __m256i high_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t m = 0; m < args.rows; ++m) {
    const auto* a = static_cast<const uint16_t*>(args.a) + m * args.a_stride;
    __m256 acc[8];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t pair = 0; pair < args.k_padded / 2; ++pair) {
      uint32_t bits;
      __builtin_memcpy(&bits, a + 2 * pair, sizeof(bits));
      const __m256 a0 = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(bits << 16)));
      const __m256 a1 = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(bits & 0xffff0000u)));
      const uint16_t* w = panel + pair * kPanelWidth * 2;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16 * j));
        acc[j] = _mm256_fmadd_ps(a0, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), acc[j]);
        acc[j] = _mm256_fmadd_ps(a1, _mm256_castsi256_ps(_mm256_and_si256(v, high_mask)), acc[j]);
      }
    }
    float* out = args.out + m * args.out_stride;
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + 8 * j, acc[j]);
  }
}

void PanelFloatAvx2(const PanelArgs& args) {
  const auto* panel = static_cast<const float*>(args.panel);
  for (int64_t m = 0; m < args.rows; ++m) {
    const auto* a = static_cast<const float*>(args.a) + m * args.a_stride;
    __m256 acc[8];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t k = 0; k < args.k_padded; ++k) {
      const __m256 x = _mm256_set1_ps(a[k]);
      const float* w = panel + k * kPanelWidth;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w + 8 * j), acc[j]);
    }
    float* out = args.out + m * args.out_stride;
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + 8 * j, acc[j]);
  }
}

// int8: one row at a time; eight 8-column int32 sums per group. Eight columns' k pair is 16 bytes, widened
// to int16 and multiplied against the row's broadcast int16 pair with vpmaddwd.
void PanelInt8Avx2(const Int8PanelArgs& args) {
  const int64_t pairs = args.k_padded / 2;
  for (int64_t m = 0; m < args.rows; ++m) {
    const int16_t* a = args.a + m * args.a_stride;
    __m256 total[8];
    for (auto& v : total) v = _mm256_setzero_ps();
    for (int64_t g = 0; g < args.groups; ++g) {
      __m256i sum[8];
      for (auto& v : sum) v = _mm256_setzero_si256();
      const int64_t last = std::min(pairs, (g + 1) * args.group_pairs);
      for (int64_t pair = g * args.group_pairs; pair < last; ++pair) {
        int32_t bits;
        __builtin_memcpy(&bits, a + 2 * pair, sizeof(bits));
        const __m256i x = _mm256_set1_epi32(bits);
        const int8_t* w = args.panel + pair * kPanelWidth * 2;
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * j)));
          sum[j] = _mm256_add_epi32(sum[j], _mm256_madd_epi16(v, x));
        }
      }
      const __m256 a_scale = _mm256_set1_ps(args.a_scales[m * args.groups + g]);
      const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
      for (int j = 0; j < 8; ++j) {
        const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(w_scales + 8 * j), a_scale);
        total[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[j]), scale, total[j]);
      }
    }
    float* out = args.out + m * args.out_stride;
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + 8 * j, total[j]);
  }
}

void AttendAvx2(const AttentionArgs& args) { Attend(args); }
void RoundRowToBf16Avx2(const float* src, uint16_t* dst, int64_t count) { RoundRowToBf16(src, dst, count); }
void AddRowToBf16Avx2(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count) {
  AddRowToBf16(residual, values, dst, count);
}
void SiluMulAvx2(const float* gate, const float* up, float* out, int64_t count) { SiluMul(gate, up, out, count); }
void GeluTanhMulAvx2(const float* gate, const float* up, float* out, int64_t count) {
  GeluTanhMul(gate, up, out, count);
}

}  // namespace llmc::model::cpu
