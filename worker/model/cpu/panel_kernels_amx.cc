// Built with -mamx-tile -mamx-bf16 -mavx512f (worker/CMakeLists.txt); called only where the CPU has AMX and the
// kernel granted this process the tile state (cpu_isa.cc).
#include <cstring>

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

}  // namespace llmc::model::cpu
