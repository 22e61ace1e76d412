// Built with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 (worker/CMakeLists.txt); called only where the CPU
// has them (cpu_isa.h).
#include <cstring>
#include <limits>

#include "worker/model/cpu/attention_kernel.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/row_blocks.h"
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

template <int Rows>
struct Bf16Runner {
  static void Run(const PanelArgs& args, int64_t m0) { Bf16Rows<Rows>(args, m0); }
};
template <int Rows>
struct FloatRunner {
  static void Run(const PanelArgs& args, int64_t m0) { FloatRows<Rows>(args, m0); }
};

// FastExp (vector_math.h) on 16 lanes, with the same clamp (which here also turns NaN into 88), rounding and
// polynomial.
inline __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), _mm512_min_ps(x, _mm512_set1_ps(88.0f)));
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 whole = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, whole);
  __m512 p = _mm512_set1_ps(1.5252733804059840e-5f);
  for (const float c : {1.5403530393381609e-4f, 1.3333558146428443e-3f, 9.6181291076284772e-3f, 5.5504108664821580e-2f,
                        2.4022650695910071e-1f, 6.9314718055994531e-1f, 1.0f}) {
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
  }
  const __m512i exponent = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(whole), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
}

// Sixteen rows of 16 dwords each into sixteen columns: out[c] holds dword c of every row.
inline void Transpose16x16(__m512i r[16], __m512i out[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // b[4i + c], 128-bit lane L: dword 4L + c of rows 4i .. 4i + 3.
  for (int i = 0; i < 4; ++i) {
    b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i e0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x88);
    const __m512i e1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xdd);
    const __m512i e2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x88);
    const __m512i e3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xdd);
    out[c] = _mm512_shuffle_i32x4(e0, e2, 0x88);
    out[4 + c] = _mm512_shuffle_i32x4(e1, e3, 0x88);
    out[8 + c] = _mm512_shuffle_i32x4(e0, e2, 0xdd);
    out[12 + c] = _mm512_shuffle_i32x4(e1, e3, 0xdd);
  }
}

// Attention scores with bfloat16 dot products, for bfloat16 caches in blocks of 16 tokens and head sizes that
// are multiples of 32: queries stay the model's bfloat16 values (the scale applies to the scores), and a key
// block is transposed to [hd / 2][16 tokens] bfloat16 pairs, so one vdpbf16ps multiplies a query's pair of
// dimensions into all 16 keys: half the instructions of float32 multiply-adds and no conversions.
struct Bf16PairKeys {
  static bool Supports(const AttentionArgs& args) {
    return args.bf16 && args.block_size == 16 && args.head_dim % 32 == 0 && args.head_dim <= 512;
  }
  static void LoadQuery(const AttentionArgs& args, int64_t token, int64_t head, float* slot) {
    const int64_t hd = args.head_dim;
    std::memcpy(slot, static_cast<const uint16_t*>(args.query) + (token * args.num_heads + head) * hd, hd * 2);
  }
  static void LoadKeys(const AttentionArgs& args, int64_t base, int64_t token_stride, int64_t valid, float* keys) {
    const auto* cache = static_cast<const uint16_t*>(args.key_cache) + base;
    auto* pairs = reinterpret_cast<uint32_t*>(keys);  // [hd / 2][16]
    for (int64_t chunk = 0; chunk < args.head_dim / 32; ++chunk) {
      __m512i rows[16], columns[16];
      for (int64_t t = 0; t < 16; ++t) {
        rows[t] = t < valid ? _mm512_loadu_si512(cache + t * token_stride + 32 * chunk) : _mm512_setzero_si512();
      }
      Transpose16x16(rows, columns);
      for (int c = 0; c < 16; ++c) _mm512_storeu_si512(pairs + (16 * chunk + c) * 16, columns[c]);
    }
  }
  // Each query's sum runs in kChains / N interleaved partial sums (pairs is a multiple of 16), added at the end,
  // so that few queries (decode, GQA groups of 1-4) do not wait on one chain of hd / 2 dependent vdpbf16ps (AMD
  // Zen 4, one Qwen3-0.6B-shaped layer at 512 cached tokens: 53 us against 59).
  template <int N>
  static void ScoresOf(const uint32_t* q, int64_t q_stride, int64_t pairs, const uint32_t* keys, float scale,
                       float* s) {
    constexpr int kChains = 8;
    constexpr int kPartials = N >= kChains ? 1 : kChains / N;
    __m512 acc[N][kPartials];
    for (int i = 0; i < N; ++i) {
      for (int u = 0; u < kPartials; ++u) acc[i][u] = _mm512_setzero_ps();
    }
    for (int64_t d2 = 0; d2 < pairs; d2 += kPartials) {
      for (int u = 0; u < kPartials; ++u) {
        const __m512bh k = (__m512bh)_mm512_loadu_si512(keys + (d2 + u) * 16);
        for (int i = 0; i < N; ++i) {
          acc[i][u] =
              _mm512_dpbf16_ps(acc[i][u], (__m512bh)_mm512_set1_epi32(static_cast<int>(q[i * q_stride + d2 + u])), k);
        }
      }
    }
    const __m512 scales = _mm512_set1_ps(scale);
    for (int i = 0; i < N; ++i) {
      __m512 sum = acc[i][0];
      for (int u = 1; u < kPartials; ++u) sum = _mm512_add_ps(sum, acc[i][u]);
      _mm512_storeu_ps(s + 16 * i, _mm512_mul_ps(sum, scales));
    }
  }
  // Values as bfloat16 pairs of consecutive tokens, [bs / 2][hd / 16][16 dims][2 tokens], so the weighted sum
  // over a block is one vdpbf16ps per token pair and 16 dimensions (the weights rounded to bfloat16, as
  // flash attention does on GPUs; the sum of the weights stays float32).
  static void LoadValues(const AttentionArgs& args, int64_t base, int64_t token_stride, int64_t valid, float* values) {
    alignas(64) static constexpr uint16_t kLow[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                      8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    alignas(64) static constexpr uint16_t kHigh[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                       24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
    const __m512i low = _mm512_load_si512(kLow), high = _mm512_load_si512(kHigh);
    const auto* cache = static_cast<const uint16_t*>(args.value_cache) + base;
    auto* pairs = reinterpret_cast<uint32_t*>(values);
    const int64_t vectors = args.head_dim / 16;
    for (int64_t pair = 0; pair < 8; ++pair) {
      const int64_t t = 2 * pair;
      for (int64_t chunk = 0; chunk < args.head_dim / 32; ++chunk) {
        const __m512i first =
            t < valid ? _mm512_loadu_si512(cache + t * token_stride + 32 * chunk) : _mm512_setzero_si512();
        const __m512i second =
            t + 1 < valid ? _mm512_loadu_si512(cache + (t + 1) * token_stride + 32 * chunk) : _mm512_setzero_si512();
        uint32_t* dst = pairs + (pair * vectors + 2 * chunk) * 16;
        _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(first, low, second));
        _mm512_storeu_si512(dst + 16, _mm512_permutex2var_epi16(first, high, second));
      }
    }
  }
  template <int Vectors>
  static void AccumulateVectors(float* a, float correction, const uint32_t* weights, const uint32_t* pairs,
                                int64_t token_pairs, int64_t vectors) {
    __m512 acc[Vectors];
    const __m512 scale = _mm512_set1_ps(correction);
    for (int j = 0; j < Vectors; ++j) acc[j] = _mm512_mul_ps(_mm512_loadu_ps(a + 16 * j), scale);
    for (int64_t pair = 0; pair < token_pairs; ++pair) {
      const __m512bh w = (__m512bh)_mm512_set1_epi32(static_cast<int>(weights[pair]));
      for (int j = 0; j < Vectors; ++j) {
        acc[j] = _mm512_dpbf16_ps(acc[j], w, (__m512bh)_mm512_loadu_si512(pairs + (pair * vectors + j) * 16));
      }
    }
    for (int j = 0; j < Vectors; ++j) _mm512_storeu_ps(a + 16 * j, acc[j]);
  }
  static void AccumulateValues(float* a, float correction, const float* p, const float* values, int64_t visible,
                               int64_t hd) {
    const __mmask16 mask = static_cast<__mmask16>((1u << visible) - 1);
    alignas(32) uint32_t weights[8];  // (p[2i], p[2i + 1]) in bfloat16; zero past `visible`
    _mm256_store_si256(reinterpret_cast<__m256i*>(weights),
                       (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, p)));
    const auto* pairs = reinterpret_cast<const uint32_t*>(values);
    const int64_t vectors = hd / 16, token_pairs = (visible + 1) / 2;
    int64_t j = 0;
    for (; j + 8 <= vectors; j += 8)
      AccumulateVectors<8>(a + 16 * j, correction, weights, pairs + 16 * j, token_pairs, vectors);
    if (vectors - j == 4) {
      AccumulateVectors<4>(a + 16 * j, correction, weights, pairs + 16 * j, token_pairs, vectors);
    } else if (vectors - j == 2) {
      AccumulateVectors<2>(a + 16 * j, correction, weights, pairs + 16 * j, token_pairs, vectors);
    } else {
      for (; j < vectors; ++j) {
        AccumulateVectors<1>(a + 16 * j, correction, weights, pairs + 16 * j, token_pairs, vectors);
      }
    }
  }
  // Heads heads of one row at once, Vectors vectors of 16 dimensions each (head_dim = 16 * Vectors): every
  // value vector is loaded once for all of them, and Heads x Vectors independent sums (at most 24, with the
  // weights' broadcasts and the values in the other registers) keep the multiply-adds from waiting on each other.
  template <int Heads, int Vectors>
  static void AccumulateHeads(float* a, const float* corrections, const uint32_t (*weights)[8], const uint32_t* pairs,
                              int64_t token_pairs) {
    __m512 acc[Heads][Vectors];
    for (int h = 0; h < Heads; ++h) {
      const __m512 scale = _mm512_set1_ps(corrections[h]);
      for (int j = 0; j < Vectors; ++j)
        acc[h][j] = _mm512_mul_ps(_mm512_loadu_ps(a + h * 16 * Vectors + 16 * j), scale);
    }
    for (int64_t pair = 0; pair < token_pairs; ++pair) {
      __m512bh value[Vectors];
      for (int j = 0; j < Vectors; ++j) value[j] = (__m512bh)_mm512_loadu_si512(pairs + (pair * Vectors + j) * 16);
      for (int h = 0; h < Heads; ++h) {
        const __m512bh w = (__m512bh)_mm512_set1_epi32(static_cast<int>(weights[h][pair]));
        for (int j = 0; j < Vectors; ++j) acc[h][j] = _mm512_dpbf16_ps(acc[h][j], w, value[j]);
      }
    }
    for (int h = 0; h < Heads; ++h) {
      for (int j = 0; j < Vectors; ++j) _mm512_storeu_ps(a + h * 16 * Vectors + 16 * j, acc[h][j]);
    }
  }
  // The last `left` (< Heads) heads of a group, in one AccumulateHeads.
  template <int Heads, int Vectors>
  static void AccumulateLastHeads(int64_t left, float* a, const float* corrections, const uint32_t (*weights)[8],
                                  const uint32_t* pairs, int64_t token_pairs) {
    if constexpr (Heads > 1) {
      if (left == Heads - 1) {
        AccumulateHeads<Heads - 1, Vectors>(a, corrections, weights, pairs, token_pairs);
        return;
      }
      AccumulateLastHeads<Heads - 1, Vectors>(left, a, corrections, weights, pairs, token_pairs);
    }
  }
  // The heads of a group, kMaxHeads at a time.
  template <int Vectors>
  static void AccumulateInBatches(float* a, const float* corrections, const uint32_t (*weights)[8],
                                  const uint32_t* pairs, int64_t token_pairs, int64_t group) {
    constexpr int kMaxHeads = 24 / Vectors;
    int64_t g = 0;
    for (; g + kMaxHeads <= group; g += kMaxHeads) {
      AccumulateHeads<kMaxHeads, Vectors>(a + g * 16 * Vectors, corrections + g, weights + g, pairs, token_pairs);
    }
    AccumulateLastHeads<kMaxHeads, Vectors>(group - g, a + g * 16 * Vectors, corrections + g, weights + g, pairs,
                                            token_pairs);
  }
  static void AccumulateGroup(float* a, const float* corrections, const float* p, const float* values, int64_t visible,
                              int64_t hd, int64_t group, int64_t bs) {
    const int64_t vectors = hd / 16;
    if ((vectors != 4 && vectors != 8) || group > 64) {
      for (int64_t g = 0; g < group; ++g) AccumulateValues(a + g * hd, corrections[g], p + g * bs, values, visible, hd);
      return;
    }
    const __mmask16 mask = static_cast<__mmask16>((1u << visible) - 1);
    alignas(32) uint32_t weights[64][8];  // per head, (p[2i], p[2i + 1]) in bfloat16; zero past `visible`
    for (int64_t g = 0; g < group; ++g) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(weights[g]),
                         (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, p + g * bs)));
    }
    const auto* pairs = reinterpret_cast<const uint32_t*>(values);
    const int64_t token_pairs = (visible + 1) / 2;
    if (vectors == 4) {
      AccumulateInBatches<4>(a, corrections, weights, pairs, token_pairs, group);
    } else {
      AccumulateInBatches<8>(a, corrections, weights, pairs, token_pairs, group);
    }
  }
  // FloatKeys::Exponentiate on one 16-lane vector (the block is 16 tokens), with a vector FastExp.
  static void Exponentiate(float* s, int64_t visible, float running_max, float* new_max, float* block_sum) {
    const __mmask16 mask = static_cast<__mmask16>((1u << visible) - 1);
    const __m512 scores = _mm512_maskz_loadu_ps(mask, s);
    const __m512 visible_scores =
        _mm512_mask_blend_ps(mask, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), scores);
    *new_max = std::max(running_max, _mm512_reduce_max_ps(visible_scores));
    const __m512 weights = _mm512_maskz_mov_ps(mask, Exp16(_mm512_sub_ps(scores, _mm512_set1_ps(*new_max))));
    _mm512_storeu_ps(s, weights);
    *block_sum = _mm512_reduce_add_ps(weights);
  }
  static void Scores(const AttentionArgs& args, const float* q_slots, int64_t count, const float* keys, float* s) {
    const auto* q = reinterpret_cast<const uint32_t*>(q_slots);
    const auto* k = reinterpret_cast<const uint32_t*>(keys);
    const int64_t stride = args.head_dim, pairs = args.head_dim / 2;  // slots are hd floats apart
    int64_t i = 0;
    for (; i + 4 <= count; i += 4) ScoresOf<4>(q + i * stride, stride, pairs, k, args.scale, s + i * 16);
    switch (count - i) {
      case 3:
        ScoresOf<3>(q + i * stride, stride, pairs, k, args.scale, s + i * 16);
        break;
      case 2:
        ScoresOf<2>(q + i * stride, stride, pairs, k, args.scale, s + i * 16);
        break;
      case 1:
        ScoresOf<1>(q + i * stride, stride, pairs, k, args.scale, s + i * 16);
        break;
      default:
        break;
    }
  }
};

}  // namespace

void PanelBf16Avx512(const PanelArgs& args) { ForRowBlocks<Bf16Runner>(args); }
void PanelFloatAvx512(const PanelArgs& args) { ForRowBlocks<FloatRunner>(args); }
void AttendAvx512(const AttentionArgs& args) {
  if (Bf16PairKeys::Supports(args)) {
    AttendWith<Bf16PairKeys>(args);
  } else {
    Attend(args);
  }
}
void RoundRowToBf16Avx512(const float* src, uint16_t* dst, int64_t count) { RoundRowToBf16(src, dst, count); }
void AddRowToBf16Avx512(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count) {
  AddRowToBf16(residual, values, dst, count);
}
void SiluMulAvx512(const float* gate, const float* up, float* out, int64_t count) { SiluMul(gate, up, out, count); }
void GeluTanhMulAvx512(const float* gate, const float* up, float* out, int64_t count) {
  GeluTanhMul(gate, up, out, count);
}

}  // namespace llmc::model::cpu
