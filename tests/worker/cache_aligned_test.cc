// The kernels' thread-local buffers start on a cache line (worker/model/cpu/cache_aligned.h): AMX tile loads and
// 64-byte vector loads of a buffer that starts elsewhere split every row over two lines (a prefill of dequantized
// int4 panels ran about a third slower when malloc happened to return such a buffer).

#include "worker/model/cpu/cache_aligned.h"

#include <cstdint>
#include <vector>

#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/mxfp4_weight.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/panel_matmul.h"
// (keep this order: libtorch's headers define glog's CHECK; Catch's, included after, must win)
#include "tests/support/catch.h"

namespace llmc::model::cpu {
namespace {

bool OnCacheLine(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % kCacheLineBytes == 0; }

TEST_CASE("cache-aligned buffers: vectors, caller buffers and dequantized panels start on a cache line",
          "[unit][cache_aligned]") {
  // Sizes malloc would place 16 bytes into a line, grown one after another as the kernels grow them.
  CacheAlignedVector<uint16_t> halves;
  for (const size_t size : {1, 3, 24, 100, 4864 * 64, 7}) {
    halves.resize(size);
    CHECK(OnCacheLine(halves.data()));
  }
  const CacheAlignedVector<float> copy(17, 1.0f);
  CHECK(OnCacheLine(copy.data()));

  for (const size_t bytes : {8, 40, 1000, 1 << 20}) {
    CHECK(OnCacheLine(CallerBuffer(kActivationBytes, bytes)));
    CHECK(OnCacheLine(CallerBuffer(kActivationScales, bytes + 24)));
  }
  CHECK(OnCacheLine(TeamMemberScratch()));

  const int64_t k = 64;
  const std::vector<int8_t> int8_panel(k * kPanelWidth, 3);
  const std::vector<uint8_t> int4_panel(k * kPanelWidth / 2, 0x5a);
  const std::vector<float> scales(kPanelWidth, 0.5f);
  const std::vector<uint8_t> exponents(2 * kPanelWidth, 127);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    CHECK(OnCacheLine(DequantizePanel(int8_panel.data(), scales.data(), 1, k, k, dtype)));
    CHECK(OnCacheLine(DequantizeInt4Panel(int4_panel.data(), scales.data(), 1, k, k, dtype)));
    CHECK(OnCacheLine(DequantizeMxfp4Panel(int4_panel.data(), exponents.data(), 2, k, dtype)));
  }
}

}  // namespace
}  // namespace llmc::model::cpu
