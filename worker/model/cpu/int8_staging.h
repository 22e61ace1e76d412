#ifndef LLMC_WORKER_MODEL_CPU_INT8_STAGING_H_
#define LLMC_WORKER_MODEL_CPU_INT8_STAGING_H_

// What the fused operators do around the int8 panel kernels (panel_kernels.h): quantize an input row to the
// kernels' int16, and, for batches big enough to prefer the bfloat16/float32 kernels, dequantize a panel.
#include <ATen/ATen.h>

#include <cstdint>

namespace llmc::model::cpu {

// x[0..k) to dst[0..stride) as int16, symmetric, one scale per group of `group_size` inputs (scales[g]:
// x ~= dst * scale), round to nearest even, zeros past k. A group holding Inf or NaN gets zeros and a NaN
// scale, so the operator's output shows it instead of reading garbage.
// `levels` is the largest magnitude: 32767 for the int16 activations of W8A16, 127 for W8A8. Vectorized where
// the CPU has AVX512 (the same values on every path); from bfloat16 values as from their float32 values.
void QuantizeActivationRow(const float* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                           int16_t levels, int16_t* dst, float* scales);
void QuantizeActivationRow(const c10::BFloat16* x, int64_t k, int64_t stride, int64_t group_size, int64_t groups,
                           int16_t levels, int16_t* dst, float* scales);

// A row quantized with levels 127 as the bytes the byte kernels read: dst[0..stride) and, per group,
// offsets[g] = 128 * the group's sum. For PanelW8A8Avx512 the bytes are in the row's order; with
// `int4_byte_order` (PanelW4A8Avx512; stride a multiple of 8) each k octet's are in the order 0, 4, 1, 5, 2, 6, 3, 7
// (the order that kernel's nibble masks give the weights in). Vectorized where the CPU has AVX512.
void NarrowActivationRow(const int16_t* src, int64_t stride, int64_t group_size, int64_t groups, bool int4_byte_order,
                         int8_t* dst, int32_t* offsets);

// How int8 weights meet the activations: quantized to int16 (W8A16: near the float result) or to int8
// (W8A8: twice the arithmetic rate on VNNI, a little less exact), or, the default, by the batch: int16 below
// kInt8ActivationMinRows rows, where the weights' read sets the pace and both run as fast, and int8 from
// there on CPUs with an int8 kernel that uses it (AVX512-VNNI, AMX-INT8). Set per thread for the steps of
// one model (LoadedModel); the fused operators read it on the thread that calls them.
enum class Int8Activations { kInt16, kInt8, kByBatch };
Int8Activations ActiveInt8Activations();
// Whether the active kernel path multiplies int8 activations faster than int16 (PanelW8A8Avx512 on
// AVX512-VNNI, and AMX-INT8 beside it): there W8A8 rows are staged as bytes for it.
bool HasByteActivationKernel();
// What a projection over `rows` activation rows runs under the active setting: kInt16 or kInt8.
Int8Activations Int8ActivationsForRows(int64_t rows);
// The same for int4 weights, where only the byte kernels (PanelW4A8Avx512 with AVX512-VNNI, PanelW4A8Amx with
// AMX-INT8) take int8 activations (elsewhere always kInt16). By the batch: W4A8 from kInt4ByteActivationMinRows rows,
// below them W4A16.
Int8Activations Int4ActivationsForRows(int64_t rows);
// From this many rows kByBatch quantizes activations to int8 (AMD EPYC, 2026-11-27: W8A8 steps of 8 rows
// and more beat W8A16, of 4 rows and fewer match it).
constexpr int64_t kInt8ActivationMinRows = 8;
// int4 weights take W4A8 from the first row. W4A16 unpacks every nibble with one or two 16-bit shifts, seven per
// 64 bytes, and the shifts set its pace: in cache, on one core of an AMD Zen 4 part (llmc_panel_kernel_bench),
// 29 GB/s of int4 weights for one row against W4A8's 60 (and 22 against 46 at two rows, 13 against 26 at four),
// while each core must read about 33 GB/s when the machine's memory is fast. There the Qwen2-0.5B step at b=1
// took 5.9-6.1 ms as W4A8 against 6.5-6.7 ms as W4A16 (best of 300, in turns; 2026-11-30); when memory is slow
// W4A16 was 1-4 % faster. Two independent sums per row did not move W4A16: it is the shifts, not their latency.
// --quantization=w4a16 keeps weight-only int4 at every batch size.
constexpr int64_t kInt4ByteActivationMinRows = 1;
// On AMX, W4A8 batches of 16 rows and more run on AMX-INT8 tiles where their groups are whole tile steps (64 and
// 128 inputs; Xeon, 2026-11-30, Qwen2-0.5B shape: b=16 35 ms against 51 dequantized, b=32 48 against 67; prefill
// 512 302 ms against 316-336 once the tile buffers sat on cache lines, 2026-12-01). Groups of 32 inputs do not
// fill a tile step: from this many rows their panels are dequantized to bfloat16 for the AMX-BF16 tiles instead
// (the activations then stay unquantized), below it they run on PanelW4A8Avx512. From Int4RequantizedMinRows() rows
// (int4_requantize.h) weights that qualify, groups of 32 included, run requantized to int8 on the W8A8 tiles.
constexpr int64_t kAmxInt4DequantizedMinRows = 64;
// k pairs per activation group, the inputs that share one activation scale, for an int8 weight with
// `weight_groups` scale groups over `k` inputs. A weight with several groups lends them. With one scale per
// output row, int8 activations take one scale per row (per token, as vLLM's W8A8): a single group over k,
// rounded up to whole AMX-INT8 steps (64 inputs), so each product ends with one epilogue instead of one per
// group, and split past kMaxInt8ActivationGroup inputs: in int32, a group's sum of 128 x 127 products
// (weights run from -128, as int8 checkpoints hold them, to 127) overflows past 132,104 inputs, and so does
// the W8A8 kernel's offset (128 x the activations' sum); that kernel's biased sum of (w + 128) x a would
// pass 2^31 after 66,311 inputs.
// int16 activations keep groups of 128 inputs: their products are 258 times larger, and 128 keeps those
// sums in range with room to spare. `activations` is kInt16 or kInt8 (Int8ActivationsForRows).
int64_t ActivationGroupPairs(int64_t k, int64_t weight_groups, Int8Activations activations);
constexpr int64_t kMaxInt8ActivationGroup = 32768;

class ScopedInt8Activations {
 public:
  explicit ScopedInt8Activations(Int8Activations activations);
  ~ScopedInt8Activations();
  ScopedInt8Activations(const ScopedInt8Activations&) = delete;
  ScopedInt8Activations& operator=(const ScopedInt8Activations&) = delete;

 private:
  Int8Activations previous_;
};

// One packed int8 panel ([k_padded / 2][64][2], scales [weight_groups][64] over `k` inputs) as a panel of
// the plain kernels' layout in `dtype`: bfloat16 [k_padded / 2][64][2] rounded to nearest even, or float32
// [k_padded][64]. The result lives in a buffer of the calling thread until its next call.
const void* DequantizePanel(const int8_t* panel, const float* scales, int64_t weight_groups, int64_t k,
                            int64_t k_padded, at::ScalarType dtype);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_INT8_STAGING_H_
