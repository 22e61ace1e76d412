// Built with -mamx-tile -mamx-bf16 -mamx-int8 -mavx512f -mavx512bw -mavx512vbmi (worker/CMakeLists.txt); called
// only where the CPU has AMX (and VBMI) and the kernel granted this process the tile state (cpu_isa.cc);
// PanelW8A8Amx, PanelW4A8Amx and RequantizedInt4TilePanel only with AMX-INT8.
#include <algorithm>
#include <cstring>
#include <vector>

#include "worker/model/cpu/cache_aligned.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/x86_intrinsics.h"

namespace llmc::model::cpu {
namespace {

// Tiles 0-3: float32 results (16 rows x 16 columns) for the panel's four column blocks; 4: activation rows
// (16 rows x 32 bfloat16); 5-7: weight pairs (16 pairs x 16 columns x 2).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

void LoadTileConfig() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// One k quad of the W8A8 tile panel: 64 columns x 4 bytes.
constexpr int64_t kQuadBytes = kPanelWidth * 4;
// One tdpbssd step in k pairs (16 quads).
constexpr int64_t kInt8StepPairs = kAmxInt8StepInputs / 2;

// The calling thread's buffer for a panel of `pairs` k pairs as k quads, rounded up to whole tile steps
// (`quads` of them); the caller passes up to 128 rows, so one panel serves them all.
int8_t* QuadBuffer(int64_t pairs, int64_t* quads) {
  thread_local CacheAlignedVector<int8_t> buffer;
  const int64_t steps = (pairs + kInt8StepPairs - 1) / kInt8StepPairs;
  *quads = steps * kInt8StepPairs / 2;
  buffer.resize(*quads * kQuadBytes);
  return buffer.data();
}

// The int8 panel ([pairs][kPanelWidth][2]) as tdpbssd's B operand takes it: [quads][kPanelWidth][4], the two k
// pairs of a quad side by side for each column; zeros past the panel's depth up to a whole step. Rebuilt on
// every call (QuadBuffer); the shuffles cost far less than reading the panel from memory, which the kernel has to
// do anyway.
const int8_t* QuadPanel(const int8_t* panel, int64_t pairs) {
  int64_t quads = 0;
  int8_t* const buffer = QuadBuffer(pairs, &quads);
  // 16-bit element 2c of the result is column c of the first pair, 2c + 1 column c of the second.
  alignas(64) static const uint16_t kInterleave[2][32] = {
      {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
       8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47},
      {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
       24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63}};
  const __m512i low_columns = _mm512_load_si512(kInterleave[0]);
  const __m512i high_columns = _mm512_load_si512(kInterleave[1]);
  auto load_pair_half = [&](int64_t pair, int half) {
    return pair < pairs ? _mm512_loadu_si512(panel + pair * kPanelWidth * 2 + 64 * half) : _mm512_setzero_si512();
  };
  for (int64_t quad = 0; quad < quads; ++quad) {
    int8_t* out = buffer + quad * kQuadBytes;
    for (int half = 0; half < 2; ++half) {  // columns 0-31, then 32-63
      const __m512i first = load_pair_half(2 * quad, half), second = load_pair_half(2 * quad + 1, half);
      _mm512_storeu_si512(out + 128 * half, _mm512_permutex2var_epi16(first, low_columns, second));
      _mm512_storeu_si512(out + 128 * half + 64, _mm512_permutex2var_epi16(first, high_columns, second));
    }
  }
  return buffer;
}

// The int4 panel (int4_weight.h: per k octet and column a 32-bit word, the even k of the octet in nibbles 0-3 of
// its low half, the odd k in those of its high half) as the same B operand: each nibble sign-extended to a byte,
// the four k of a quad side by side for each column. Zeros past the panel's depth up to a whole step.
const int8_t* QuadPanelFromInt4(const uint8_t* panel, int64_t pairs) {
  int64_t quads = 0;
  int8_t* const buffer = QuadBuffer(pairs, &quads);
  const int64_t octets = pairs / 4;
  // Within each 32-bit word: bytes 0, 2, 1, 3.
  const __m512i even_bytes_first =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
  const __m512i nibble = _mm512_set1_epi8(0x0f), sign = _mm512_set1_epi8(0x08);
  for (int64_t o = 0; o < octets; ++o) {
    int8_t* first_quad = buffer + 2 * o * kQuadBytes;
    for (int i = 0; i < 4; ++i) {  // 16 columns at a time
      const __m512i raw = _mm512_loadu_si512(panel + o * kPanelWidth * 4 + 64 * i);
      // Bytes b of `low` hold the nibble at bit 8b, of `high` the one at bit 8b + 4: for b = 0, 1, 2, 3 the
      // octet's k 0, 4, 1, 5 and 2, 6, 3, 7. Sign-extended: (n ^ 8) - 8.
      const auto widen = [&](__m512i nibbles) {
        return _mm512_sub_epi8(_mm512_xor_si512(_mm512_and_si512(nibbles, nibble), sign), sign);
      };
      // Reordered to k 0, 1, 4, 5 and 2, 3, 6, 7.
      const __m512i low = _mm512_shuffle_epi8(widen(raw), even_bytes_first);
      const __m512i high = _mm512_shuffle_epi8(widen(_mm512_srli_epi32(raw, 4)), even_bytes_first);
      // k 0-3 (the low halves: k 0, 1 and 2, 3), then k 4-7 (the high halves).
      const __m512i quad0 = _mm512_mask_blend_epi16(0xaaaaaaaa, low, _mm512_slli_epi32(high, 16));
      const __m512i quad1 = _mm512_mask_blend_epi16(0xaaaaaaaa, _mm512_srli_epi32(low, 16), high);
      _mm512_storeu_si512(first_quad + 64 * i, quad0);
      _mm512_storeu_si512(first_quad + kQuadBytes + 64 * i, quad1);
    }
  }
  std::memset(buffer + 2 * octets * kQuadBytes, 0, (quads - 2 * octets) * kQuadBytes);
  return buffer;
}

// Sixteen rows at a time: for each activation group, the int32 sums of its steps in tiles 0-3 (signed bytes
// against signed bytes, exact), stored to L1 and added to the output as PanelW8A8Avx512 adds its sums: the
// same float arithmetic on the same integers, so the same bits.
void MultiplyQuads(const Int8PanelArgs& args, const int8_t* quads) {
  const int64_t pairs = args.k_padded / 2;
  LoadTileConfig();
  alignas(64) int32_t sums[16 * kPanelWidth];
  const int64_t a_stride_bytes = args.a_stride;
  for (int64_t m0 = 0; m0 < args.rows; m0 += 16) {
    const int8_t* rows = args.a8 + m0 * args.a_stride;
    for (int64_t g = 0; g < args.groups; ++g) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      const int64_t first = g * args.group_pairs, last = std::min(pairs, first + args.group_pairs);
      for (int64_t pair = first; pair < last; pair += kInt8StepPairs) {
        const int8_t* w_step = quads + pair / 2 * kQuadBytes;
        _tile_loadd(4, rows + 2 * pair, a_stride_bytes);
        _tile_loadd(6, w_step, kQuadBytes);
        _tile_loadd(7, w_step + 64, kQuadBytes);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_loadd(5, w_step + 128, kQuadBytes);
        _tile_loadd(6, w_step + 192, kQuadBytes);
        _tile_dpbssd(2, 4, 5);
        _tile_dpbssd(3, 4, 6);
      }
      _tile_stored(0, sums, kPanelWidth * 4);
      _tile_stored(1, sums + 16, kPanelWidth * 4);
      _tile_stored(2, sums + 32, kPanelWidth * 4);
      _tile_stored(3, sums + 48, kPanelWidth * 4);
      const float* w_scales = args.scales + std::min(g, args.weight_groups - 1) * kPanelWidth;
      for (int r = 0; r < 16; ++r) {
        const __m512 a_scale = _mm512_set1_ps(args.a_scales[(m0 + r) * args.groups + g]);
        float* out = args.out + (m0 + r) * args.out_stride;
        for (int j = 0; j < 4; ++j) {
          const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(w_scales + 16 * j), a_scale);
          const __m512 before = g == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(out + 16 * j);
          const __m512 values = _mm512_cvtepi32_ps(_mm512_load_si512(sums + r * kPanelWidth + 16 * j));
          _mm512_storeu_ps(out + 16 * j, _mm512_fmadd_ps(values, scale, before));
        }
      }
    }
  }
  _tile_release();
}

// PanelBf16Amx's steps ask for the next step's activation rows and weight lines (4 KiB) into L1: decode batches of
// 4-32 rows stream the panel from memory in the first pass and ran 7-9 % faster with it; two steps ahead gained
// nothing more.
constexpr int64_t kAmxPrefetchSteps = 1;

}  // namespace

// Other code on this thread (oneDNN) may configure the tiles too, so the configuration is loaded on every
// call; it costs far less than one panel.
void PanelBf16Amx(const PanelArgs& args) {
  LoadTileConfig();
  const auto* a = static_cast<const uint16_t*>(args.a);
  const auto* panel = static_cast<const char*>(args.panel);
  const int64_t a_stride_bytes = args.a_stride * 2;
  const int64_t out_stride_bytes = args.out_stride * 4;
  constexpr int64_t kPairStrideBytes = kPanelWidth * 2 * 2;  // one k pair across the panel
  const int64_t steps = args.k_padded / 32;
  // Sixteen rows at a time, all four column blocks in one pass over the panel: the first pass streams the panel
  // from memory strictly in order, later passes find it in L2.
  for (int64_t m0 = 0; m0 < args.rows; m0 += 16) {
    const uint16_t* rows = a + m0 * args.a_stride;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t step = 0; step < steps; ++step) {
      const char* w_step = panel + step * 16 * kPairStrideBytes;
      if (step + kAmxPrefetchSteps < steps) {
        const char* a_ahead = reinterpret_cast<const char*>(rows + (step + kAmxPrefetchSteps) * 32);
        for (int r = 0; r < 16; ++r) _mm_prefetch(a_ahead + r * a_stride_bytes, _MM_HINT_T0);
        const char* w_ahead = w_step + kAmxPrefetchSteps * 16 * kPairStrideBytes;
        for (int line = 0; line < 16 * kPairStrideBytes / 64; ++line) _mm_prefetch(w_ahead + 64 * line, _MM_HINT_T0);
      }
      _tile_loadd(4, rows + step * 32, a_stride_bytes);
      _tile_loadd(6, w_step, kPairStrideBytes);
      _tile_loadd(7, w_step + 64, kPairStrideBytes);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, w_step + 128, kPairStrideBytes);
      _tile_loadd(6, w_step + 192, kPairStrideBytes);
      _tile_dpbf16ps(2, 4, 5);
      _tile_dpbf16ps(3, 4, 6);
    }
    float* out = args.out + m0 * args.out_stride;
    _tile_stored(0, out, out_stride_bytes);
    _tile_stored(1, out + 16, out_stride_bytes);
    _tile_stored(2, out + 32, out_stride_bytes);
    _tile_stored(3, out + 48, out_stride_bytes);
  }
  _tile_release();
}

const int8_t* AmxTilePanel(const void* panel, int64_t k_padded, bool int4) {
  return int4 ? QuadPanelFromInt4(static_cast<const uint8_t*>(panel), k_padded / 2)
              : QuadPanel(static_cast<const int8_t*>(panel), k_padded / 2);
}

// The int4 panel requantized (int4_requantize.h) as the W8A8 tile operand. Each group's sixteen possible values of
// each column are computed once, as RequantizeInt4PanelPortable computes them, into a table the stored nibbles
// index (vpermi2b, eight columns a table pair); the nibbles are laid out as QuadPanelFromInt4 lays them. Zeros past
// the panel's depth up to a whole step.
const int8_t* RequantizedInt4TilePanel(const uint8_t* panel, const float* factors, const int32_t* offsets,
                                       int64_t weight_groups, int64_t group_pairs, int64_t k_padded) {
  const int64_t pairs = k_padded / 2;
  int64_t quads = 0;
  int8_t* const buffer = QuadBuffer(pairs, &quads);
  const int64_t octets = pairs / 4;
  const __m512i even_bytes_first =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i table_rows = _mm512_loadu_si512(kInt4RequantizeTableRows);
  alignas(64) int8_t table[kPanelWidth * 16];
  int64_t group = -1;
  for (int64_t o = 0; o < octets; ++o) {
    const int64_t g = std::min(4 * o / group_pairs, weight_groups - 1);
    if (g != group) {
      group = g;
      FillInt4RequantizeTableAvx512(factors, offsets, g, table);
    }
    int8_t* first_quad = buffer + 2 * o * kQuadBytes;
    for (int i = 0; i < 4; ++i) {  // 16 columns at a time, as QuadPanelFromInt4
      const __m512i raw = _mm512_loadu_si512(panel + o * kPanelWidth * 4 + 64 * i);
      const __m512i low = _mm512_shuffle_epi8(_mm512_and_si512(raw, nibble), even_bytes_first);
      const __m512i high = _mm512_shuffle_epi8(_mm512_and_si512(_mm512_srli_epi32(raw, 4), nibble), even_bytes_first);
      const __m512i quad0 = _mm512_mask_blend_epi16(0xaaaaaaaa, low, _mm512_slli_epi32(high, 16));
      const __m512i quad1 = _mm512_mask_blend_epi16(0xaaaaaaaa, _mm512_srli_epi32(low, 16), high);
      const int8_t* columns = table + 16 * 16 * i;
      const __m512i first_a = _mm512_load_si512(columns), first_b = _mm512_load_si512(columns + 64);
      const __m512i second_a = _mm512_load_si512(columns + 128), second_b = _mm512_load_si512(columns + 192);
      const auto look_up = [&](__m512i quad) {
        const __m512i index = _mm512_or_si512(quad, table_rows);
        return _mm512_mask_blend_epi8(0xffffffff00000000ull, _mm512_permutex2var_epi8(first_a, index, first_b),
                                      _mm512_permutex2var_epi8(second_a, index, second_b));
      };
      _mm512_storeu_si512(first_quad + 64 * i, look_up(quad0));
      _mm512_storeu_si512(first_quad + kQuadBytes + 64 * i, look_up(quad1));
    }
  }
  std::memset(buffer + 2 * octets * kQuadBytes, 0, (quads - 2 * octets) * kQuadBytes);
  return buffer;
}

namespace {

// The tile operand the caller built (PanelMultiplier), or built here for a caller that did not.
const int8_t* TilePanelOf(const Int8PanelArgs& args, bool int4) {
  return args.amx_tile_panel != nullptr ? args.amx_tile_panel : AmxTilePanel(args.panel, args.k_padded, int4);
}

}  // namespace

void PanelW8A8Amx(const Int8PanelArgs& args) { MultiplyQuads(args, TilePanelOf(args, /*int4=*/false)); }

void PanelW4A8Amx(const Int8PanelArgs& args) { MultiplyQuads(args, TilePanelOf(args, /*int4=*/true)); }

}  // namespace llmc::model::cpu
