// Staging and panel streaming shared by the fused operators (panel_matmul.h).
#include "worker/model/cpu/panel_matmul.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

#include "worker/model/cpu/cache_aligned.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/int4_requantize.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/mxfp4_weight.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"

namespace llmc::model::cpu {

PanelWeight::PanelWeight(const at::Tensor& weight, const at::Tensor& weight_scale) : packed(weight) {
  if (weight_scale.dim() == 4 && weight_scale.size(0) == 2) {
    scales = weight_scale.select(0, 0);
    zero_offsets = weight_scale.select(0, 1);
  } else {
    scales = weight_scale;
  }
}

char* CallerBuffer(CallerBufferSlot slot, size_t bytes) {
  struct Buffer {
    CacheAlignedBytes data;
    size_t size = 0;
  };
  thread_local Buffer buffers[kCallerBufferSlots];
  Buffer& buffer = buffers[slot];
  // Only grown, and without keeping the old bytes: callers write a buffer before they read it.
  if (buffer.size < bytes) {
    buffer.data = NewCacheAlignedBytes(bytes);
    buffer.size = bytes;
  }
  return buffer.data.get();
}

namespace {

using PanelKernel = void (*)(const PanelArgs&);

// Rows of activations per kernel call: a block of this many rows of the widest input (4864 bfloat16) stays
// in a 2 MiB L2 beside the panel being multiplied.
constexpr int64_t kRowBlock = 128;
// AMX pays for itself from a few rows on; below, the AVX512-BF16 kernel streams the panel as fast.
constexpr int64_t kAmxMinRows = 4;

// From this many rows an int8 or int4 weight's panel is dequantized into the activations' type (in L2) and
// multiplied by the bfloat16/float32 kernels, whose arithmetic beats the W8A16 kernels' once every weight
// serves many rows: AMX tiles from a few rows, the others for prefill-sized blocks. The W8A8 kernel does
// twice the bfloat16 kernels' products per instruction, so without AMX it keeps every batch; with AMX-INT8,
// its tiles (UsesAmxInt8) take the batches the AVX512 kernel does not. int4 rows staged as bytes stay W4A8: on
// AMX-INT8 tiles from 16 rows where their groups are whole tile steps, else on PanelW4A8Avx512 below
// kAmxInt4DequantizedMinRows rows; at every batch size without AMX. From Int4RequantizedMinRows() rows a weight
// that qualifies runs requantized instead, whatever its groups (int4_requantize.h): on the W8A8 tiles, or on the
// avx512_vnni path PanelW8A8Avx512.
int64_t DequantizedPanelMinRows(Int8Activations activations, bool int4) {
  if (int4 && activations == Int8Activations::kInt8) {
    return ActiveCpuIsa() == CpuIsa::kAmx ? kAmxInt4DequantizedMinRows : std::numeric_limits<int64_t>::max();
  }
  // On AMX the W8A16 kernels keep decode batches: dequantizing a panel for 16 rows cost more than the tiles
  // saved (Xeon, 2026-11-25: b=16 60 ms against 46 ms in bfloat16).
  if (ActiveCpuIsa() == CpuIsa::kAmx) return activations == Int8Activations::kInt16 ? 64 : 16;
  // Without AVX512-BF16 a dequantized panel would go to the AVX2 bfloat16 kernel: the integer kernels keep
  // every batch.
  if (ActiveCpuIsa() == CpuIsa::kAvx512Vnni) return std::numeric_limits<int64_t>::max();
  return activations == Int8Activations::kInt8 ? std::numeric_limits<int64_t>::max() : 256;
}

// W8A8 batches of at least this many rows run on AMX-INT8 tiles, where the CPU has them and the activation
// groups are whole tile steps (64 inputs; not for groups of 32).
constexpr int64_t kAmxInt8MinRows = 16;
// Batches below kAmxMinRows are staged without padding rows (PrepareStaging): every kernel that reads whole
// 16-row tiles must start at or above it.
static_assert(kAmxInt8MinRows >= kAmxMinRows, "AMX-INT8 tiles would read unstaged padding rows");

bool UsesAmxInt8(int64_t rows, Int8Activations activations, int64_t group_pairs) {
#ifdef LLMC_CPU_X86_KERNELS
  return activations == Int8Activations::kInt8 && rows >= kAmxInt8MinRows &&
         (2 * group_pairs) % kAmxInt8StepInputs == 0 && HasAmxInt8();
#else
  (void)rows;
  (void)activations;
  (void)group_pairs;
  return false;
#endif
}

PanelKernel SelectPanelKernel(at::ScalarType dtype, int64_t rows) {
  const CpuIsa isa = ActiveCpuIsa();
#ifdef LLMC_CPU_X86_KERNELS
  if (dtype == at::kBFloat16) {
    if (isa == CpuIsa::kAmx && rows >= kAmxMinRows) return &PanelBf16Amx;
    if (isa >= CpuIsa::kAvx512Bf16) return &PanelBf16Avx512;
    if (isa >= CpuIsa::kAvx2) return &PanelBf16Avx2;
    return &PanelBf16Portable;
  }
  if (isa >= CpuIsa::kAvx512Bf16) return &PanelFloatAvx512;
  if (isa >= CpuIsa::kAvx2) return &PanelFloatAvx2;
#else
  (void)isa;
  (void)rows;
  if (dtype == at::kBFloat16) return &PanelBf16Portable;
#endif
  return &PanelFloatPortable;
}

using Int8PanelKernel = void (*)(const Int8PanelArgs&);

// W8A8 batches of fewer rows run the int16 kernel on the same (127-level) values, which gives the same
// bits and, with the weights' read setting the pace, streams them a little faster.
constexpr int64_t kByteKernelMinRows = 2;

// W8A8 rows staged as bytes run the vpdpbusd kernel; the other paths take them as int16 of the same values.
Int8PanelKernel SelectInt8PanelKernel(bool byte_activations) {
#ifdef LLMC_CPU_X86_KERNELS
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512Vnni) return byte_activations ? &PanelW8A8Avx512 : &PanelInt8Avx512;
  if (isa >= CpuIsa::kAvx2) return &PanelInt8Avx2;
#endif
  (void)byte_activations;
  return &PanelInt8Portable;
}

// MXFP4 weights: only rows staged as bytes take a kernel (PrepareStaging dequantizes panels elsewhere).
Int8PanelKernel SelectMxfp4PanelKernel(bool byte_activations) {
#ifdef LLMC_CPU_X86_KERNELS
  if (byte_activations && ActiveCpuIsa() >= CpuIsa::kAvx512Vnni) {
    return ActiveWeightPrefetch() == WeightPrefetch::kToL2 ? &PanelMxfp4Avx512PrefetchL2 : &PanelMxfp4Avx512;
  }
#else
  (void)byte_activations;
#endif
  TORCH_CHECK(false, "MXFP4 weights have no kernel for these activations");
  return nullptr;
}

// int4 weights: W4A8 on rows staged as bytes, else the W4A16 kernel of the path.
Int8PanelKernel SelectInt4PanelKernel(bool byte_activations) {
#ifdef LLMC_CPU_X86_KERNELS
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512Vnni) {
    if (ActiveWeightPrefetch() == WeightPrefetch::kToL2) {
      return byte_activations ? &PanelW4A8Avx512PrefetchL2 : &PanelInt4Avx512PrefetchL2;
    }
    return byte_activations ? &PanelW4A8Avx512 : &PanelInt4Avx512;
  }
  if (isa >= CpuIsa::kAvx2) return &PanelInt4Avx2;
#endif
  (void)byte_activations;
  return &PanelInt4Portable;
}

// int4 weights with zero points: the kernels take every nibble as u - 8, so each row adds, per group,
// (8 - z) * (the group's sum of its staged values), scaled as the kernels scale their sums.
void AddZeroPointSums(const Staged& a, int64_t m0, int64_t rows, const float* scales, const float* zero_offsets,
                      int64_t weight_groups, float* c) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* sums = a.group_sums + (m0 + r) * a.groups;
    const float* a_scales = a.scales + (m0 + r) * a.groups;
    float* out = c + r * kPanelWidth;
    for (int64_t g = 0; g < a.groups; ++g) {
      if (sums[g] == 0) continue;
      const int64_t wg = std::min(g, weight_groups - 1);
      const float* w_scales = scales + wg * kPanelWidth;
      const float* offsets = zero_offsets + wg * kPanelWidth;
      for (int64_t col = 0; col < kPanelWidth; ++col) {
        const int32_t sum = static_cast<int32_t>(offsets[col]) * sums[g];
        out[col] += static_cast<float>(sum) * (w_scales[col] * a_scales[g]);
      }
    }
  }
}

// int4: two weights a byte.
int64_t PanelBytes(const PanelWeight& weight) {
  const int64_t k_padded = PackedDepth(weight.packed);
  return weight.int4() ? k_padded * kPanelWidth / 2
                       : k_padded * kPanelWidth * static_cast<int64_t>(weight.packed.element_size());
}

#ifdef LLMC_CPU_X86_KERNELS
// An int4 panel requantized (int4_requantize.h) as the W8A8 tiles' operand or, for PanelW8A8Avx512, in the int8
// panels' layout, in the calling thread's buffers; its column scales into column_scales.
const int8_t* RequantizedPanel(const uint8_t* panel, const float* scales, const float* zero_offsets,
                               int64_t weight_groups, int64_t k, int64_t k_padded, bool for_tiles,
                               float* column_scales) {
  thread_local CacheAlignedVector<float> factors;
  thread_local CacheAlignedVector<int32_t> offsets;
  factors.resize(weight_groups * kPanelWidth);
  offsets.resize(weight_groups * kPanelWidth);
  Int4RequantizeFactors(scales, zero_offsets, weight_groups, factors.data(), offsets.data(), column_scales);
  const int64_t group_pairs = weight_groups == 1 ? k_padded / 2 : k / weight_groups / 2;
  if (for_tiles) {
    return RequantizedInt4TilePanel(panel, factors.data(), offsets.data(), weight_groups, group_pairs, k_padded);
  }
  thread_local CacheAlignedVector<int8_t> values;
  values.resize(k_padded * kPanelWidth);
  RequantizeInt4PanelPairsAvx512(panel, factors.data(), offsets.data(), weight_groups, group_pairs, k_padded,
                                 values.data());
  return values.data();
}
#endif

float* TeamScratch() {
  thread_local CacheAlignedVector<float> scratch(kRowBlock * kPanelWidth);
  return scratch.data();
}

Staged PrepareStaging(int64_t rows, int64_t stride, at::ScalarType dtype) {
  const int64_t rows_padded = (rows + kRowAlign - 1) / kRowAlign * kRowAlign;
  const int64_t element_size = static_cast<int64_t>(c10::elementSize(dtype));
  // Below kAmxMinRows no kernel reads past the real rows: a single decode row skips zeroing 15 more.
  const int64_t rows_staged = rows < kAmxMinRows ? rows : rows_padded;
  Staged staged;
  staged.data = CallerBuffer(kStagedActivations, rows_padded * stride * element_size);
  staged.stride = stride;
  staged.rows = rows;
  staged.rows_padded = rows_padded;
  staged.rows_staged = rows_staged;
  staged.element_size = element_size;
  return staged;
}

// One row of float32 or bfloat16 values to int16 (int8_staging.h), into row `row` of the staging.
template <typename T>
void QuantizeRow(const T* x, int64_t k, const Staged& staged, int64_t row) {
  int16_t* values = reinterpret_cast<int16_t*>(staged.data) + row * staged.stride;
  QuantizeActivationRow(x, k, staged.stride, 2 * staged.group_pairs, staged.groups, staged.levels, values,
                        staged.scales + row * staged.groups);
  if (staged.group_sums != nullptr) {
    const int64_t group_size = 2 * staged.group_pairs;
    for (int64_t g = 0; g < staged.groups; ++g) {
      int32_t sum = 0;
      for (int64_t i = g * group_size; i < std::min(staged.stride, (g + 1) * group_size); ++i) sum += values[i];
      staged.group_sums[row * staged.groups + g] = sum;
    }
  }
  if (staged.bytes != nullptr) {
    NarrowActivationRow(values, staged.stride, 2 * staged.group_pairs, staged.groups, staged.int4_byte_order,
                        staged.bytes + row * staged.stride, staged.offsets + row * staged.groups);
  }
}

// A padding row of an int16 staging: zero values, scales and offsets, as QuantizeRow makes of zeros.
void ZeroRow(const Staged& staged, int64_t row) {
  std::fill_n(reinterpret_cast<int16_t*>(staged.data) + row * staged.stride, staged.stride, int16_t{0});
  std::fill_n(staged.scales + row * staged.groups, staged.groups, 0.0f);
  if (staged.group_sums != nullptr) std::fill_n(staged.group_sums + row * staged.groups, staged.groups, 0);
  if (staged.bytes != nullptr) {
    std::fill_n(staged.bytes + row * staged.stride, staged.stride, int8_t{0});
    std::fill_n(staged.offsets + row * staged.groups, staged.groups, 0);
  }
}

}  // namespace

Staged PrepareStaging(int64_t rows, int64_t k, const PanelWeight& weight, at::ScalarType dtype,
                      LargeInt4Batches large_int4) {
  const int64_t k_padded = PackedDepth(weight.packed);
  // MXFP4 rows are bytes at every batch size (llama.cpp, too, multiplies MXFP4 by 8-bit activations per 32
  // inputs). float32 activations (reference packages) and CPUs without the byte kernel multiply dequantized
  // panels: exact in float32.
  const bool mxfp4_dequantized = weight.mxfp4() && (dtype == at::kFloat || !HasByteActivationKernel());
  const Int8Activations activations = weight.mxfp4()  ? Int8Activations::kInt8
                                      : weight.int4() ? Int4ActivationsForRows(rows)
                                                      : Int8ActivationsForRows(rows);
  const bool int4 = weight.int4() && !weight.mxfp4();
  // Large batches for the tiles (or PanelW8A8Avx512) requantize int4 weights to int8 where they allow it; their rows
  // then take one scale each.
  const bool int4_as_int8 = int4 && large_int4 == LargeInt4Batches::kOnTiles && rows >= Int4RequantizedMinRows() &&
                            activations == Int8Activations::kInt8 && RequantizesLargeInt4Batches() &&
                            Int4RequantizesToInt8(weight);
  const int64_t group_pairs =
      weight.quantized() ? ActivationGroupPairs(k, int4_as_int8 ? 1 : weight.scales.size(1), activations) : 0;
  const int64_t dequantized_min_rows = DequantizedPanelMinRows(activations, int4);
  const bool int4_on_tiles = int4 && (large_int4 == LargeInt4Batches::kOnTiles || rows < dequantized_min_rows);
  const bool amx_int8 = (weight.int8() || int4_on_tiles) && UsesAmxInt8(rows, activations, group_pairs);
  if (!weight.quantized() || mxfp4_dequantized || (!amx_int8 && rows >= dequantized_min_rows)) {
    Staged staged = PrepareStaging(rows, k_padded, dtype);
    staged.features = k;
    return staged;
  }
  const int64_t stride =
      amx_int8 ? (k_padded + kAmxInt8StepInputs - 1) / kAmxInt8StepInputs * kAmxInt8StepInputs : k_padded;
  Staged staged = PrepareStaging(rows, stride, at::kShort);
  staged.features = k;
  staged.int16 = true;
  staged.group_pairs = group_pairs;
  staged.groups = (k_padded / 2 + staged.group_pairs - 1) / staged.group_pairs;
  staged.scales =
      reinterpret_cast<float*>(CallerBuffer(kActivationScales, staged.rows_padded * staged.groups * sizeof(float)));
  staged.int4_as_int8 = int4_as_int8;
  // Requantized panels hold the zero points in their values.
  if (weight.zero_offsets.defined() && !int4_as_int8) {
    staged.group_sums = reinterpret_cast<int32_t*>(
        CallerBuffer(kActivationGroupSums, staged.rows_padded * staged.groups * sizeof(int32_t)));
  }
  if (activations == Int8Activations::kInt8) {
    staged.levels = 127;
    staged.amx_int8 = amx_int8;
    // W4A8 has no int16 kernel of the same values: its rows are bytes at every batch size.
    if (amx_int8 || (HasByteActivationKernel() && (rows >= kByteKernelMinRows || weight.int4()))) {
      staged.bytes = reinterpret_cast<int8_t*>(CallerBuffer(kActivationBytes, staged.rows_padded * stride));
      staged.offsets = reinterpret_cast<int32_t*>(
          CallerBuffer(kActivationOffsets, staged.rows_padded * staged.groups * sizeof(int32_t)));
      staged.int4_byte_order = weight.int4() && !amx_int8 && !int4_as_int8;
    }
  }
  return staged;
}

Staged PrepareStagingReadingAhead(int64_t rows, int64_t k, const PanelWeight& weight, at::ScalarType dtype) {
  Staged staged = PrepareStaging(rows, k, weight, dtype);
  staged.read_after = FollowingPanels(weight.packed, PanelBytes(weight));
  return staged;
}

void ReserveStaging(int64_t max_tokens, int64_t max_depth, at::ScalarType dtype) {
  // The AMX-INT8 staging rounds rows up to whole tile steps.
  const int64_t max_stride =
      (PaddedDepth(max_depth) + kAmxInt8StepInputs - 1) / kAmxInt8StepInputs * kAmxInt8StepInputs;
  PrepareStaging(max_tokens, max_stride, dtype);
  // int8 weights: the smallest groups (32 inputs) give the most activation scales.
  const int64_t rows_padded = (max_tokens + kRowAlign - 1) / kRowAlign * kRowAlign;
  const int64_t max_groups = PaddedDepth(max_depth) / 32 + 1;
  CallerBuffer(kActivationScales, rows_padded * max_groups * sizeof(float));
  CallerBuffer(kActivationGroupSums, rows_padded * max_groups * sizeof(int32_t));  // int4 zero points
  if (ActiveInt8Activations() != Int8Activations::kInt16) {
    CallerBuffer(kActivationBytes, rows_padded * max_stride);
    CallerBuffer(kActivationOffsets, rows_padded * max_groups * sizeof(int32_t));
  }
}

int MaxTeamSize() { return std::max(1, at::get_num_threads()); }

template <typename T>
void StageRows(TeamMember& member, const Staged& staged, int64_t k, RowFn<T> row_fn) {
  const auto [first, last] = member.Share(staged.rows_staged);
  if (staged.int16) {
    thread_local std::vector<T> values;
    // Only grown: resizing down and up again zero-filled the difference at every projection of a step.
    if (static_cast<int64_t>(values.size()) < k) values.resize(k);
    for (int64_t row = first; row < last; ++row) {
      if (row >= staged.rows) {
        ZeroRow(staged, row);
        continue;
      }
      row_fn(row, values.data());
      QuantizeRow(values.data(), k, staged, row);
    }
    member.Barrier();
    return;
  }
  for (int64_t row = first; row < last; ++row) {
    T* dst = reinterpret_cast<T*>(staged.data) + row * staged.stride;
    int64_t filled = 0;
    if (row < staged.rows) {
      row_fn(row, dst);
      filled = k;
    }
    std::fill(dst + filled, dst + staged.stride, T(0));
  }
  member.Barrier();
}

template <typename T>
void NormRow(const T* x, const T* weight, float eps, int64_t k, T* dst) {
  // Sixteen running sums, which the vectorizer keeps in registers: one sum is a serial chain of k additions.
  constexpr int64_t kLanes = 16;
  float lanes[kLanes] = {};
  const int64_t whole = k / kLanes * kLanes;
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += static_cast<float>(x[i + j]) * static_cast<float>(x[i + j]);
  }
  for (int64_t i = whole; i < k; ++i) lanes[i - whole] += static_cast<float>(x[i]) * static_cast<float>(x[i]);
  float sum = 0;
  for (const float lane : lanes) sum += lane;
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(k) + eps);
  for (int64_t i = 0; i < k; ++i) dst[i] = T(static_cast<float>(x[i]) * scale * static_cast<float>(weight[i]));
}

template <typename T>
void StageNormalizedRows(TeamMember& member, const Staged& staged, const T* x, const T* norm, float eps, int64_t k) {
  StageRows<T>(member, staged, k, [&](int64_t row, T* dst) { NormRow(x + row * k, norm, eps, k, dst); });
}

template void StageRows<float>(TeamMember&, const Staged&, int64_t, RowFn<float>);
template void StageRows<c10::BFloat16>(TeamMember&, const Staged&, int64_t, RowFn<c10::BFloat16>);
template void NormRow<float>(const float*, const float*, float, int64_t, float*);
template void NormRow<c10::BFloat16>(const c10::BFloat16*, const c10::BFloat16*, float, int64_t, c10::BFloat16*);
template void StageNormalizedRows<float>(TeamMember&, const Staged&, const float*, const float*, float, int64_t);
template void StageNormalizedRows<c10::BFloat16>(TeamMember&, const Staged&, const c10::BFloat16*, const c10::BFloat16*,
                                                 float, int64_t);

PanelMultiplier::PanelMultiplier(const Staged& staged, const PanelWeight& panel_weight)
    : a(staged), weight(panel_weight) {
  const at::Tensor& packed = weight.packed;
  panels = packed.size(0);
  k_padded = PackedDepth(packed);
  panel_bytes = PanelBytes(weight);
  base = static_cast<const char*>(packed.data_ptr());
  weight_groups = weight.quantized() ? weight.scales.size(1) : 0;
  scales = weight.quantized() && !weight.mxfp4() ? weight.scales.data_ptr<float>() : nullptr;
  exponents = weight.mxfp4() ? weight.scales.data_ptr<uint8_t>() : nullptr;
  zero_offsets = weight.zero_offsets.defined() ? weight.zero_offsets.data_ptr<float>() : nullptr;
  // int8 and int4 weights run their kernels on int16-staged rows, or (many rows, staged in the activations'
  // type) the plain kernels on each panel dequantized once.
  if (a.int16 && weight.mxfp4()) {
    int8_kernel = SelectMxfp4PanelKernel(a.bytes != nullptr);
  } else if (a.int16) {
    int8_kernel = weight.int4() ? SelectInt4PanelKernel(a.bytes != nullptr) : SelectInt8PanelKernel(a.bytes != nullptr);
  }
#ifdef LLMC_CPU_X86_KERNELS
  if (a.amx_int8) {
    int8_kernel = weight.int4() && !a.int4_as_int8 ? &PanelW4A8Amx : &PanelW8A8Amx;
  } else if (a.int4_as_int8) {
    int8_kernel = &PanelW8A8Avx512;
  }
#endif
  dequantize = weight.quantized() && !a.int16;
  plain_type = dequantize ? (a.element_size == 4 ? at::kFloat : at::kBFloat16) : packed.scalar_type();
}

void PanelMultiplier::Multiply(int64_t p, float* c, PanelEpilogue epilogue) const {
  const void* panel = base + p * panel_bytes;
  const float* panel_scales = scales == nullptr ? nullptr : scales + p * weight_groups * kPanelWidth;
  const uint8_t* panel_exponents = exponents == nullptr ? nullptr : exponents + p * weight_groups * kPanelWidth;
  if (dequantize && panel_exponents != nullptr) {
    panel =
        DequantizeMxfp4Panel(static_cast<const uint8_t*>(panel), panel_exponents, weight_groups, k_padded, plain_type);
  } else if (dequantize && weight.int4()) {
    panel = DequantizeInt4Panel(static_cast<const uint8_t*>(panel), scales + p * weight_groups * kPanelWidth,
                                weight_groups, a.features, k_padded, plain_type,
                                zero_offsets == nullptr ? nullptr : zero_offsets + p * weight_groups * kPanelWidth);
  } else if (dequantize) {
    panel = DequantizePanel(static_cast<const int8_t*>(panel), scales + p * weight_groups * kPanelWidth, weight_groups,
                            a.features, k_padded, plain_type);
  }
  // The tiles' operand is built once for all of the panel's row blocks.
  const int8_t* amx_tile_panel = nullptr;
  int64_t kernel_weight_groups = weight_groups;
  alignas(64) float column_scales[kPanelWidth];
#ifdef LLMC_CPU_X86_KERNELS
  if (a.int4_as_int8) {
    const int8_t* requantized =
        RequantizedPanel(static_cast<const uint8_t*>(panel), panel_scales,
                         zero_offsets == nullptr ? nullptr : zero_offsets + p * weight_groups * kPanelWidth,
                         weight_groups, a.features, k_padded, /*for_tiles=*/a.amx_int8, column_scales);
    if (a.amx_int8) {
      amx_tile_panel = requantized;
    } else {
      panel = requantized;
    }
    panel_scales = column_scales;
    kernel_weight_groups = 1;
  } else if (a.amx_int8) {
    amx_tile_panel = AmxTilePanel(panel, k_padded, weight.int4());
  }
#endif
  for (int64_t m0 = 0; m0 < a.rows; m0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, a.rows - m0);
    if (int8_kernel != nullptr) {
      int8_kernel({reinterpret_cast<const int16_t*>(a.data) + m0 * a.stride, a.scales + m0 * a.groups, a.stride, rows,
                   k_padded, a.group_pairs, a.groups, static_cast<const int8_t*>(panel), panel_scales,
                   kernel_weight_groups, c, kPanelWidth, a.bytes == nullptr ? nullptr : a.bytes + m0 * a.stride,
                   a.offsets == nullptr ? nullptr : a.offsets + m0 * a.groups, panel_exponents, amx_tile_panel});
      if (zero_offsets != nullptr && !a.int4_as_int8) {
        AddZeroPointSums(a, m0, rows, scales + p * weight_groups * kPanelWidth,
                         zero_offsets + p * weight_groups * kPanelWidth, weight_groups, c);
      }
    } else {
      SelectPanelKernel(
          plain_type, rows)({a.data + m0 * a.stride * a.element_size, a.stride, rows, k_padded, panel, c, kPanelWidth});
    }
    epilogue(p, m0, rows, c);
  }
}

void MatmulPanels(TeamMember& member, const Staged& a, const PanelWeight& weight, WorkQueue& queue,
                  PanelEpilogue epilogue) {
  const PanelMultiplier multiplier(a, weight);
  float* c = TeamScratch();
  const int64_t run = std::max<int64_t>(1, multiplier.panels / (16 * member.size()));
  for (auto [first, last] = queue.Claim(member, run); first < last; std::tie(first, last) = queue.Claim(member, run)) {
    for (int64_t p = first; p < last; ++p) multiplier.Multiply(p, c, epilogue);
  }
  ReadShareWhileWaiting(member, a.read_after);
}

Staged StagedRange(const Staged& staged, int64_t first_row, int64_t rows) {
  Staged range = staged;
  range.data = staged.data + first_row * staged.stride * staged.element_size;
  range.rows = rows;
  range.rows_padded = rows;
  range.rows_staged = rows;
  if (staged.scales != nullptr) range.scales = staged.scales + first_row * staged.groups;
  if (staged.bytes != nullptr) range.bytes = staged.bytes + first_row * staged.stride;
  if (staged.offsets != nullptr) range.offsets = staged.offsets + first_row * staged.groups;
  if (staged.group_sums != nullptr) range.group_sums = staged.group_sums + first_row * staged.groups;
  return range;
}

float* TeamMemberScratch() { return TeamScratch(); }

void CheckPacked(const char* op, const at::Tensor& hidden, const PanelWeight& weight, int64_t min_columns) {
  TORCH_CHECK(hidden.dim() == 2 && hidden.is_contiguous(), op, ": input must be a contiguous [tokens, features]");
  CheckPacked(op, hidden.size(1), hidden.scalar_type(), weight, min_columns);
}

void CheckPacked(const char* op, int64_t features, at::ScalarType dtype, const PanelWeight& weight,
                 int64_t min_columns) {
  if (weight.mxfp4()) {
    TORCH_CHECK(IsPackedMxfp4Scales(weight.scales, weight.packed), op, ": packed MXFP4 weight needs packed exponents");
    TORCH_CHECK(features == weight.scales.size(1) * kMxfp4GroupSize, op, ": ", weight.scales.size(1),
                " MXFP4 groups do not fit ", features, " inputs");
  } else if (weight.quantized()) {
    TORCH_CHECK(IsPackedScales(weight.scales, weight.packed), op, ": packed ", weight.int4() ? "int4" : "int8",
                " weight needs packed scales");
    TORCH_CHECK(!weight.zero_offsets.defined() || weight.int4(), op, ": zero points need an int4 weight");
    const int64_t k = features, groups = weight.scales.size(1);
    const bool group_fits = weight.int4() ? IsSupportedInt4GroupSize(k / groups) : IsSupportedInt8GroupSize(k / groups);
    TORCH_CHECK(groups == 1 || (groups > 1 && k % groups == 0 && group_fits), op, ": ", groups,
                " scale groups do not fit ", k, " inputs");
  } else {
    TORCH_CHECK(dtype == weight.packed.scalar_type(), op, ": input and weight dtypes differ");
  }
  const at::Tensor& packed = weight.packed;
  TORCH_CHECK(PackedDepth(packed) == PaddedDepth(features), op, ": weight depth does not match the input");
  TORCH_CHECK(packed.size(0) * kPanelWidth >= min_columns, op, ": packed weight has too few columns");
}

}  // namespace llmc::model::cpu
