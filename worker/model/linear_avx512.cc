// Built with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 (worker/CMakeLists.txt); see linear_avx512.h for
// why nothing but intrinsics is included here.
#include "worker/model/linear_avx512.h"

// GCC 12 reports its own _mm*_undefined_* placeholders as uninitialized once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace llmc::model::avx512 {
namespace {

float Bf16ToFloat(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  __builtin_memcpy(&result, &bits, sizeof(result));
  return result;
}

uint16_t FloatToBf16(float value) {
  uint32_t bits;
  __builtin_memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);                                                      // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

struct Bf16 {
  using Element = uint16_t;
  using Vector = __m512i;
  static constexpr int64_t kLanes = 32;
  static Vector Load(const Element* p) { return _mm512_loadu_si512(p); }
  static Vector LoadPartial(const Element* p, int64_t count) {
    return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1ull << count) - 1), p);
  }
  static __m512 Dot(__m512 acc, Vector x, Vector w) { return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w); }
  static float ToFloat(Element value) { return Bf16ToFloat(value); }
  static Element FromFloat(float value) { return FloatToBf16(value); }
};

struct Float {
  using Element = float;
  using Vector = __m512;
  static constexpr int64_t kLanes = 16;
  static Vector Load(const Element* p) { return _mm512_loadu_ps(p); }
  static Vector LoadPartial(const Element* p, int64_t count) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), p);
  }
  static __m512 Dot(__m512 acc, Vector x, Vector w) { return _mm512_fmadd_ps(x, w, acc); }
  static float ToFloat(Element value) { return value; }
  static Element FromFloat(float value) { return value; }
};

// One weight row against Cols input rows. The weight is read strictly in order, one row after the other:
// interleaving several rows' streams halves the bandwidth here. Unroll independent accumulators per input
// row hide the latency of the dot-product chain.
template <typename T, int Cols>
void Tile(const SkinnyLinearArgs& args, int64_t row, int64_t m0) {
  using Element = typename T::Element;
  constexpr int kUnroll = Cols <= 2 ? 4 : 2;
  constexpr int64_t kLanes = T::kLanes;
  const int64_t k = args.k;
  const Element* w = static_cast<const Element*>(args.weight) + row * k;
  const Element* x[Cols];
  __m512 acc[Cols][kUnroll];
#pragma GCC unroll 4
  for (int c = 0; c < Cols; ++c) {
    x[c] = static_cast<const Element*>(args.input) + (m0 + c) * args.input_stride;
#pragma GCC unroll 4
    for (int u = 0; u < kUnroll; ++u) acc[c][u] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + kUnroll * kLanes <= k; i += kUnroll * kLanes) {
#pragma GCC unroll 4
    for (int u = 0; u < kUnroll; ++u) {
      const typename T::Vector wv = T::Load(w + i + u * kLanes);
#pragma GCC unroll 4
      for (int c = 0; c < Cols; ++c) acc[c][u] = T::Dot(acc[c][u], T::Load(x[c] + i + u * kLanes), wv);
    }
  }
  for (; i + kLanes <= k; i += kLanes) {
    const typename T::Vector wv = T::Load(w + i);
#pragma GCC unroll 4
    for (int c = 0; c < Cols; ++c) acc[c][0] = T::Dot(acc[c][0], T::Load(x[c] + i), wv);
  }
  if (i < k) {
    const typename T::Vector wv = T::LoadPartial(w + i, k - i);
#pragma GCC unroll 4
    for (int c = 0; c < Cols; ++c) acc[c][0] = T::Dot(acc[c][0], T::LoadPartial(x[c] + i, k - i), wv);
  }
  const float bias = args.bias != nullptr ? T::ToFloat(static_cast<const Element*>(args.bias)[row]) : 0.0f;
  Element* out = static_cast<Element*>(args.output) + m0 * args.output_stride + row;
#pragma GCC unroll 4
  for (int c = 0; c < Cols; ++c) {
#pragma GCC unroll 4
    for (int u = 1; u < kUnroll; ++u) acc[c][0] = _mm512_add_ps(acc[c][0], acc[c][u]);
    out[c * args.output_stride] = T::FromFloat(_mm512_reduce_add_ps(acc[c][0]) + bias);
  }
}

template <typename T>
void SkinnyLinear(const SkinnyLinearArgs& args, int64_t n_begin, int64_t n_end) {
  constexpr int kMaxCols = 4;
  for (int64_t row = n_begin; row < n_end; ++row) {
    int64_t m0 = 0;
    for (; m0 + kMaxCols <= args.m; m0 += kMaxCols) Tile<T, kMaxCols>(args, row, m0);
    switch (args.m - m0) {
      case 3:
        Tile<T, 3>(args, row, m0);
        break;
      case 2:
        Tile<T, 2>(args, row, m0);
        break;
      case 1:
        Tile<T, 1>(args, row, m0);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void SkinnyLinearBf16(const SkinnyLinearArgs& args, int64_t n_begin, int64_t n_end) {
  SkinnyLinear<Bf16>(args, n_begin, n_end);
}

void SkinnyLinearFloat(const SkinnyLinearArgs& args, int64_t n_begin, int64_t n_end) {
  SkinnyLinear<Float>(args, n_begin, n_end);
}

}  // namespace llmc::model::avx512
