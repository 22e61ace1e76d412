// Built with -mavx512f -mavx512bw -mavx512vl -ffp-contract=off (worker/CMakeLists.txt): the products and sums
// are rounded one at a time, as in the portable QuantizeActivationRow, so both give the same int16 values. Also
// the narrowing of those values to the byte kernels' rows (NarrowActivationRow), integers on every path.
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

// 64 values at a time: two vpmovwb and, for int4 weights, one vpshufb that puts each octet's bytes in the order
// 0, 4, 1, 5, 2, 6, 3, 7 (octets never cross a 128-bit lane: every chunk starts at a multiple of 64). The
// scalar loops took 53 ms (narrowing) and 45 ms (ordering) of a 512-token int4 prefill on AMD Zen 4.
void NarrowActivationRowAvx512(const int16_t* src, int64_t stride, int64_t group_size, int64_t groups,
                               bool int4_byte_order, int8_t* dst, int32_t* offsets) {
  const __m512i octet_order =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15));
  for (int64_t i = 0; i < stride; i += 64) {
    const int64_t left = stride - i;
    const __mmask32 low_mask = left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << left) - 1);
    const __mmask32 high_mask = left >= 64   ? ~__mmask32{0}
                                : left <= 32 ? 0
                                             : static_cast<__mmask32>((uint64_t{1} << (left - 32)) - 1);
    const __m256i low = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi16(low_mask, src + i));
    const __m256i high = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi16(high_mask, src + i + 32));
    __m512i bytes = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
    if (int4_byte_order) bytes = _mm512_shuffle_epi8(bytes, octet_order);
    if (left >= 64) {
      _mm512_storeu_si512(dst + i, bytes);
    } else {
      _mm512_mask_storeu_epi8(dst + i, (uint64_t{1} << left) - 1, bytes);
    }
  }
  const __m512i ones = _mm512_set1_epi16(1);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * group_size, end = std::min(stride, begin + group_size);
    __m512i sums = _mm512_setzero_si512();
    for (int64_t i = begin; i < end; i += 32) {
      const int64_t left = end - i;
      const __mmask32 mask = left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << left) - 1);
      sums = _mm512_add_epi32(sums, _mm512_madd_epi16(_mm512_maskz_loadu_epi16(mask, src + i), ones));
    }
    offsets[g] = 128 * _mm512_reduce_add_epi32(sums);
  }
}

}  // namespace llmc::model::cpu
