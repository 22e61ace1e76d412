// Built with -mavx512f -mavx512bw -mavx512vl -ffp-contract=off (worker/CMakeLists.txt): the products and sums
// are rounded one at a time, as in the portable QuantizeActivationRow, so both give the same int16 values.
#include "worker/model/cpu/panel_kernels.h"

// GCC 12's AVX512 intrinsics pass _mm512_undefined_*() as the unused merge source, which -O3 inlining here
// reports as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace llmc::model::cpu {
namespace {

// Up to 16 values from x on (mask: which; the others read as zero), as float32.
inline __m512 LoadFloats(const float* x, __mmask16 mask) {
  return mask == 0xffff ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(mask, x);
}
inline __m512 LoadFloats(const uint16_t* x, __mmask16 mask) {
  const __m256i halves =
      mask == 0xffff ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)) : _mm256_maskz_loadu_epi16(mask, x);
  // A bfloat16 is the high half of the float32 of the same value.
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));
}

inline __mmask16 FirstLanes(int64_t count) {
  return count >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << std::max<int64_t>(count, 0)) - 1);
}

template <typename T>
void QuantizeRow(const T* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups, int16_t levels,
                 int16_t* dst, float* scales) {
  const float top = levels;
  const __m512 top_vector = _mm512_set1_ps(top), bottom_vector = _mm512_set1_ps(-top);
  const __m512 rounder = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23, as the portable path rounds
  const __m512i magnitude_bits = _mm512_set1_epi32(0x7fffffff);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * group_size, end = std::min(k, begin + group_size);
    __m512i amax = _mm512_setzero_si512();
    for (int64_t i = begin; i < end; i += 16) {
      const __m512i bits = _mm512_castps_si512(LoadFloats(x + i, FirstLanes(end - i)));
      amax = _mm512_max_epu32(amax, _mm512_and_si512(bits, magnitude_bits));
    }
    const uint32_t amax_bits = _mm512_reduce_max_epu32(amax);
    float amax_value;
    std::memcpy(&amax_value, &amax_bits, sizeof(amax_value));
    if (amax_bits >= 0x7f800000u) {  // Inf or NaN
      std::fill(dst + begin, dst + std::max(begin, end), int16_t{0});
      scales[g] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float scale = amax_value / top;
    scales[g] = scale;
    const __m512 inverse = _mm512_set1_ps(scale >= std::numeric_limits<float>::min() ? 1.0f / scale : 0.0f);
    for (int64_t i = begin; i < end; i += 16) {
      const __mmask16 mask = FirstLanes(end - i);
      const __m512 scaled = _mm512_mul_ps(LoadFloats(x + i, mask), inverse);
      const __m512 rounded = _mm512_sub_ps(_mm512_add_ps(scaled, rounder), rounder);
      const __m512 clamped = _mm512_min_ps(top_vector, _mm512_max_ps(bottom_vector, rounded));
      // Narrowed in a register, then stored, masked only at the group's end: vpmovdw straight to memory and
      // masked stores are slow on AMD Zen 4.
      const __m256i narrowed = _mm512_cvtepi32_epi16(_mm512_cvttps_epi32(clamped));
      if (mask == 0xffff) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), narrowed);
      } else {
        _mm256_mask_storeu_epi16(dst + i, mask, narrowed);
      }
    }
  }
  std::fill(dst + std::min(k, stride), dst + stride, int16_t{0});
}

}  // namespace

void QuantizeActivationRowAvx512(const float* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                                 int16_t levels, int16_t* dst, float* scales) {
  QuantizeRow(x, k, stride, group_size, groups, levels, dst, scales);
}

void QuantizeActivationRowBf16Avx512(const uint16_t* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                                     int16_t levels, int16_t* dst, float* scales) {
  QuantizeRow(x, k, stride, group_size, groups, levels, dst, scales);
}

}  // namespace llmc::model::cpu
