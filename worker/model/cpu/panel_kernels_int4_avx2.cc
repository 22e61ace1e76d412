// Built with -mavx2 -mfma (worker/CMakeLists.txt). The int4 panel kernel (panel_kernels.h) on 256-bit vectors:
// each 8-column vector of an octet gives its four k pairs by 16-bit shifts, multiplied against two rows at a
// time with vpmaddwd; half a panel (32 columns) per pass keeps the sums in the 16 registers.
#include <algorithm>

#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

template <int J>
inline __m256i Extract(__m256i raw) {
  if constexpr (J == 3) {
    return _mm256_srai_epi16(raw, 12);
  } else {
    return _mm256_srai_epi16(_mm256_slli_epi16(raw, 12 - 4 * J), 12);
  }
}

template <int Rows, int J>
inline void DotRows(__m256i (&sum)[Rows][4], int i, __m256i w, const int32_t (&x)[Rows][4]) {
  for (int r = 0; r < Rows; ++r) {
    sum[r][i] = _mm256_add_epi32(sum[r][i], _mm256_madd_epi16(w, _mm256_set1_epi32(x[r][J])));
  }
}

// Rows rows (1 or 2) and columns half*32..half*32+31 against group g.
template <int Rows>
void Int4Group(const Int8PanelArgs& args, int64_t m0, int64_t g, int half) {
  const int16_t* a = args.a + m0 * args.a_stride;
  const auto* panel = reinterpret_cast<const uint8_t*>(args.panel);
  __m256i sum[Rows][4];
  for (int r = 0; r < Rows; ++r) {
    for (int i = 0; i < 4; ++i) sum[r][i] = _mm256_setzero_si256();
  }
  const int64_t group_octets = args.group_pairs / 4;
  const int64_t last = std::min(args.k_padded / 8, (g + 1) * group_octets);
  for (int64_t o = g * group_octets; o < last; ++o) {
    const uint8_t* w = panel + o * kPanelWidth * 4 + half * 128;
    int32_t x[Rows][4];
    for (int r = 0; r < Rows; ++r) __builtin_memcpy(x[r], a + r * args.a_stride + 8 * o, sizeof(x[r]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * i));
      DotRows<Rows, 0>(sum, i, Extract<0>(raw), x);
      DotRows<Rows, 1>(sum, i, Extract<1>(raw), x);
      DotRows<Rows, 2>(sum, i, Extract<2>(raw), x);
      DotRows<Rows, 3>(sum, i, Extract<3>(raw), x);
    }
  }
  const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth + half * 32;
  for (int r = 0; r < Rows; ++r) {
    const __m256 a_scale = _mm256_set1_ps(args.a_scales[(m0 + r) * args.groups + g]);
    float* out = args.out + (m0 + r) * args.out_stride + half * 32;
    for (int i = 0; i < 4; ++i) {
      const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(w_scales + 8 * i), a_scale);
      const __m256 before = g == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(out + 8 * i);
      _mm256_storeu_ps(out + 8 * i, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r][i]), scale, before));
    }
  }
}

}  // namespace

void PanelInt4Avx2(const Int8PanelArgs& args) {
  int64_t m0 = 0;
  for (; m0 < args.rows; m0 += 2) {
    for (int64_t g = 0; g < args.groups; ++g) {
      for (int half = 0; half < 2; ++half) {
        if (m0 + 2 <= args.rows) {
          Int4Group<2>(args, m0, g, half);
        } else {
          Int4Group<1>(args, m0, g, half);
        }
      }
    }
  }
}

void SumInt4NibblesAvx2(const double* x, int64_t count, double inverse, double* sums) {
  const __m256d scale = _mm256_set1_pd(inverse), low = _mm256_set1_pd(-8.0), high = _mm256_set1_pd(7.0);
  __m256d xq[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, qq[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
  for (int64_t i = 0; i < count; i += 8) {
    for (int j = 0; j < 2; ++j) {
      const __m256d values = _mm256_loadu_pd(x + i + 4 * j);
      const __m256d rounded =
          _mm256_round_pd(_mm256_mul_pd(values, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m256d q = _mm256_min_pd(_mm256_max_pd(rounded, low), high);
      xq[j] = _mm256_fmadd_pd(values, q, xq[j]);  // the product is exact: one rounding either way
      qq[j] = _mm256_fmadd_pd(q, q, qq[j]);
    }
  }
  alignas(32) double lanes[2][4];
  _mm256_store_pd(lanes[0], _mm256_add_pd(xq[0], xq[1]));
  _mm256_store_pd(lanes[1], _mm256_add_pd(qq[0], qq[1]));
  sums[0] = (lanes[0][0] + lanes[0][1]) + (lanes[0][2] + lanes[0][3]);
  sums[1] = (lanes[1][0] + lanes[1][1]) + (lanes[1][2] + lanes[1][3]);
}

}  // namespace llmc::model::cpu
