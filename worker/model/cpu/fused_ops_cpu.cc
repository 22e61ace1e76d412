// CPU kernels of the fused operators: activations are staged once (normalised, converted, zero-padded), then
// the members of the persistent thread team (thread_team.h) claim short runs of weight panels and stream them,
// and a per-panel epilogue finishes the columns it produced (bias, residual, SiLU * up, RoPE and the cache
// write).
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/thread_team.h"
#include "worker/model/cpu/top_logits.h"

namespace llmc::model::cpu {
namespace {

using PanelKernel = void (*)(const PanelArgs&);
using Bf16 = c10::BFloat16;

// Rows of activations per kernel call: a block of this many rows of the widest input (4864 bfloat16) stays
// in a 2 MiB L2 beside the panel being multiplied.
constexpr int64_t kRowBlock = 128;
// AMX pays for itself from a few rows on; below, the AVX512-BF16 kernel streams the panel as fast.
constexpr int64_t kAmxMinRows = 4;

// From this many rows an int8 weight's panel is dequantized into the activations' type (in L2) and
// multiplied by the bfloat16/float32 kernels, whose arithmetic beats the W8A16 kernels' once every weight
// serves many rows: AMX tiles from a few rows, the others for prefill-sized blocks. The W8A8 kernel does
// twice the bfloat16 kernels' products per instruction, so without AMX it keeps every batch; with AMX-INT8,
// its tiles (UsesAmxInt8) take the batches the AVX512 kernel does not.
int64_t DequantizedPanelMinRows(Int8Activations activations) {
  // On AMX the W8A16 kernels keep decode batches: dequantizing a panel for 16 rows cost more than the tiles
  // saved (Xeon, 2026-11-25: b=16 60 ms against 46 ms in bfloat16).
  if (ActiveCpuIsa() == CpuIsa::kAmx) return activations == Int8Activations::kInt16 ? 64 : 16;
  return activations == Int8Activations::kInt8 ? std::numeric_limits<int64_t>::max() : 256;
}

// W8A8 batches of at least this many rows run on AMX-INT8 tiles, where the CPU has them and the activation
// groups are whole tile steps (64 inputs; not for groups of 32).
constexpr int64_t kAmxInt8MinRows = 16;
// Batches below kAmxMinRows are staged without padding rows (PrepareStaging): every kernel that reads whole
// 16-row tiles must start at or above it.
static_assert(kAmxInt8MinRows >= kAmxMinRows, "AMX-INT8 tiles would read unstaged padding rows");
constexpr int64_t kAmxInt8StepInputs = 64;

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
    if (isa == CpuIsa::kAvx2) return &PanelBf16Avx2;
    return &PanelBf16Portable;
  }
  if (isa >= CpuIsa::kAvx512Bf16) return &PanelFloatAvx512;
  if (isa == CpuIsa::kAvx2) return &PanelFloatAvx2;
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
  if (isa >= CpuIsa::kAvx512Bf16) return byte_activations ? &PanelW8A8Avx512 : &PanelInt8Avx512;
  if (isa == CpuIsa::kAvx2) return &PanelInt8Avx2;
#endif
  (void)byte_activations;
  return &PanelInt8Portable;
}

using SiluMulKernel = void (*)(const float*, const float*, float*, int64_t);

SiluMulKernel SelectSiluMul() {
#ifdef LLMC_CPU_X86_KERNELS
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512Bf16) return &SiluMulAvx512;
  if (isa == CpuIsa::kAvx2) return &SiluMulAvx2;
#endif
  return &SiluMulPortable;
}

// Buffers of the calling thread (the engine thread), grown when a larger batch arrives and kept: steady
// state allocates nothing. Grown only outside parallel regions.
enum CallerBufferSlot {
  kStagedActivations = 0,
  kQkvResults = 1,
  kTopLogitLists = 2,
  kMergeCursors = 3,
  kActivationScales = 4,
  kActivationBytes = 5,
  kActivationOffsets = 6,
  kCallerBufferSlots
};

// Left uninitialised (every operator writes what it reads): the engine reserves them for its largest step
// at start-up, and only the pages steps actually use become resident.
char* CallerBuffer(CallerBufferSlot slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffers[kCallerBufferSlots];
  Buffer& buffer = buffers[slot];
  if (buffer.size < bytes) {
    buffer.data.reset(new char[bytes]);
    buffer.size = bytes;
  }
  return buffer.data.get();
}

float* TeamScratch() {
  thread_local std::vector<float> scratch(kRowBlock * kPanelWidth);
  return scratch.data();
}

// A projection's packed weight and, for int8 weights, its packed scales [panels, weight_groups, kPanelWidth].
struct PanelWeight {
  const at::Tensor& packed;
  const at::Tensor& scales;
  bool int8() const { return packed.scalar_type() == at::kChar; }
};

// k pairs per activation group of an int8 weight with `weight_groups` scale groups over `k` inputs: the
// weight's own groups, or 128 inputs for one scale per column.
int64_t Int8GroupPairs(int64_t k, int64_t weight_groups) { return weight_groups == 1 ? 64 : k / weight_groups / 2; }

struct Staged {
  char* data;
  int64_t stride;  // elements
  int64_t rows;
  int64_t rows_padded;  // what the buffers hold
  int64_t rows_staged;  // rows, and the zero rows after them that a tile kernel reads (all, from kAmxMinRows)
  int64_t element_size;
  int64_t features = 0;  // the input's width before padding
  // For int8 weights the rows are staged as int16 with one scale per row and group of group_pairs k pairs
  // (or, for many rows, in the activations' type for dequantized panels). W8A8 rows hold at most `levels`
  // 127, and on AVX512 are staged as bytes (with their offsets, panel_kernels.h) as well.
  bool int16 = false;
  int16_t levels = 32767;
  float* scales = nullptr;
  int64_t group_pairs = 0;
  int64_t groups = 0;
  int8_t* bytes = nullptr;
  int32_t* offsets = nullptr;
  bool amx_int8 = false;  // bytes for PanelW8A8Amx, rows of whole tile steps
};

Staged PrepareStaging(int64_t rows, int64_t stride, at::ScalarType dtype) {
  const int64_t rows_padded = (rows + kRowAlign - 1) / kRowAlign * kRowAlign;
  const int64_t element_size = static_cast<int64_t>(c10::elementSize(dtype));
  // Below kAmxMinRows no kernel reads past the real rows: a single decode row skips zeroing 15 more.
  const int64_t rows_staged = rows < kAmxMinRows ? rows : rows_padded;
  return {CallerBuffer(kStagedActivations, rows_padded * stride * element_size),
          stride,
          rows,
          rows_padded,
          rows_staged,
          element_size};
}

// The staging a projection's input needs: in the activations' dtype, or int16 in groups for int8 weights.
Staged PrepareStaging(int64_t rows, int64_t k, const PanelWeight& weight, at::ScalarType dtype) {
  const int64_t k_padded = PackedDepth(weight.packed);
  const Int8Activations activations = Int8ActivationsForRows(rows);
  const int64_t group_pairs = weight.int8() ? Int8GroupPairs(k, weight.scales.size(1)) : 0;
  const bool amx_int8 = weight.int8() && UsesAmxInt8(rows, activations, group_pairs);
  if (!weight.int8() || (!amx_int8 && rows >= DequantizedPanelMinRows(activations))) {
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
  if (activations == Int8Activations::kInt8) {
    staged.levels = 127;
    staged.amx_int8 = amx_int8;
    if (amx_int8 || (HasByteActivationKernel() && rows >= kByteKernelMinRows)) {
      staged.bytes = reinterpret_cast<int8_t*>(CallerBuffer(kActivationBytes, staged.rows_padded * stride));
      staged.offsets = reinterpret_cast<int32_t*>(
          CallerBuffer(kActivationOffsets, staged.rows_padded * staged.groups * sizeof(int32_t)));
    }
  }
  return staged;
}

// One row of float32 or bfloat16 values to int16 (int8_staging.h), into row `row` of the staging.
template <typename T>
void QuantizeRow(const T* x, int64_t k, const Staged& staged, int64_t row) {
  int16_t* values = reinterpret_cast<int16_t*>(staged.data) + row * staged.stride;
  QuantizeActivationRow(x, k, staged.stride, 2 * staged.group_pairs, staged.groups, staged.levels, values,
                        staged.scales + row * staged.groups);
  if (staged.bytes != nullptr) {
    NarrowActivationRow(values, staged.stride, 2 * staged.group_pairs, staged.groups,
                        staged.bytes + row * staged.stride, staged.offsets + row * staged.groups);
  }
}

// A padding row of an int16 staging: zero values, scales and offsets, as QuantizeRow makes of zeros.
void ZeroRow(const Staged& staged, int64_t row) {
  std::fill_n(reinterpret_cast<int16_t*>(staged.data) + row * staged.stride, staged.stride, int16_t{0});
  std::fill_n(staged.scales + row * staged.groups, staged.groups, 0.0f);
  if (staged.bytes != nullptr) {
    std::fill_n(staged.bytes + row * staged.stride, staged.stride, int8_t{0});
    std::fill_n(staged.offsets + row * staged.groups, staged.groups, 0);
  }
}

// The team has at most this many members (fewer when an operator runs inside another job).
int MaxTeamSize() { return std::max(1, at::get_num_threads()); }

// Each member's top-k lists for every row, then each member's merge cursors (one per member's list).
TopLogit* TopLogitLists(int64_t rows, int64_t top_k) {
  return reinterpret_cast<TopLogit*>(CallerBuffer(
      kTopLogitLists, static_cast<size_t>(MaxTeamSize()) * rows * std::max<int64_t>(top_k, 1) * sizeof(TopLogit)));
}
int64_t* MergeCursors() {
  return reinterpret_cast<int64_t*>(
      CallerBuffer(kMergeCursors, static_cast<size_t>(MaxTeamSize()) * MaxTeamSize() * sizeof(int64_t)));
}

// Inside a team job: rows split over the team; row_fn(row, dst) fills the first k elements, the padding is
// zeroed here. Ends with a barrier: the staged rows are complete for every member.
template <typename T, typename RowFn>
void StageRows(TeamMember& member, const Staged& staged, int64_t k, RowFn&& row_fn) {
  const auto [first, last] = member.Share(staged.rows_staged);
  if (staged.int16) {
    thread_local std::vector<T> values;
    values.resize(k);
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

// StageRows of RMSNorm(x) * norm, the input of the operators that fold the norm in.
template <typename T>
void StageNormalizedRows(TeamMember& member, const Staged& staged, const T* x, const T* norm, float eps, int64_t k) {
  StageRows<T>(member, staged, k, [&](int64_t row, T* dst) { NormRow(x + row * k, norm, eps, k, dst); });
}

// Inside a team job: members claim runs of panels from `queue` (one per operator, over the weight's panels);
// epilogue(panel, first_row, rows, c) sees the float results c[rows][kPanelWidth] of one panel for a block of
// rows.
template <typename Epilogue>
void MatmulPanels(TeamMember& member, const Staged& a, const PanelWeight& weight, WorkQueue& queue,
                  Epilogue&& epilogue) {
  const at::Tensor& packed = weight.packed;
  const int64_t panels = packed.size(0), k_padded = PackedDepth(packed);
  const int64_t panel_bytes = k_padded * kPanelWidth * static_cast<int64_t>(packed.element_size());
  const char* base = static_cast<const char*>(packed.data_ptr());
  const int64_t weight_groups = weight.int8() ? weight.scales.size(1) : 0;
  const float* scales = weight.int8() ? weight.scales.data_ptr<float>() : nullptr;
  // int8 weights run the int8 kernels on int16-staged rows, or (many rows, staged in the activations' type)
  // the plain kernels on each panel dequantized once.
  Int8PanelKernel int8_kernel = weight.int8() && a.int16 ? SelectInt8PanelKernel(a.bytes != nullptr) : nullptr;
#ifdef LLMC_CPU_X86_KERNELS
  if (a.amx_int8) int8_kernel = &PanelW8A8Amx;
#endif
  const bool dequantize = weight.int8() && !a.int16;
  const at::ScalarType plain_type =
      dequantize ? (a.element_size == 4 ? at::kFloat : at::kBFloat16) : packed.scalar_type();
  float* c = TeamScratch();
  const int64_t run = std::max<int64_t>(1, panels / (16 * member.size()));
  for (auto [first, last] = queue.Claim(member, run); first < last; std::tie(first, last) = queue.Claim(member, run)) {
    for (int64_t p = first; p < last; ++p) {
      const void* panel = base + p * panel_bytes;
      if (dequantize) {
        panel = DequantizePanel(static_cast<const int8_t*>(panel), scales + p * weight_groups * kPanelWidth,
                                weight_groups, a.features, k_padded, plain_type);
      }
      for (int64_t m0 = 0; m0 < a.rows; m0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, a.rows - m0);
        if (int8_kernel != nullptr) {
          int8_kernel({reinterpret_cast<const int16_t*>(a.data) + m0 * a.stride, a.scales + m0 * a.groups, a.stride,
                       rows, k_padded, a.group_pairs, a.groups, static_cast<const int8_t*>(panel),
                       scales + p * weight_groups * kPanelWidth, weight_groups, c, kPanelWidth,
                       a.bytes == nullptr ? nullptr : a.bytes + m0 * a.stride,
                       a.offsets == nullptr ? nullptr : a.offsets + m0 * a.groups});
        } else {
          SelectPanelKernel(plain_type, rows)(
              {a.data + m0 * a.stride * a.element_size, a.stride, rows, k_padded, panel, c, kPanelWidth});
        }
        epilogue(p, m0, rows, c);
      }
    }
  }
}

template <typename Fn>
void InTeam(Fn&& fn) {
  ThreadTeam::Get().Run([&](TeamMember& member) { fn(member); });
}

void CheckPacked(const char* op, const at::Tensor& hidden, const PanelWeight& weight, int64_t min_columns) {
  TORCH_CHECK(hidden.dim() == 2 && hidden.is_contiguous(), op, ": input must be a contiguous [tokens, features]");
  if (weight.int8()) {
    TORCH_CHECK(IsPackedScales(weight.scales, weight.packed), op, ": packed int8 weight needs packed scales");
    const int64_t k = hidden.size(1), groups = weight.scales.size(1);
    TORCH_CHECK(groups == 1 || (groups > 1 && k % groups == 0 && IsSupportedInt8GroupSize(k / groups)), op, ": ",
                groups, " scale groups do not fit ", k, " inputs");
  } else {
    TORCH_CHECK(hidden.scalar_type() == weight.packed.scalar_type(), op, ": input and weight dtypes differ");
  }
  const at::Tensor& packed = weight.packed;
  TORCH_CHECK(PackedDepth(packed) == PaddedDepth(hidden.size(1)), op, ": weight depth does not match the input");
  TORCH_CHECK(packed.size(0) * kPanelWidth >= min_columns, op, ": packed weight has too few columns");
}

template <typename T>
at::Tensor QkvRopeImpl(const at::Tensor& hidden, const at::Tensor& norm_weight, float eps, const PanelWeight& weight,
                       const c10::optional<at::Tensor>& bias, const at::Tensor& cos, const at::Tensor& sin,
                       at::Tensor& key_cache, at::Tensor& value_cache, const at::Tensor& slot_mapping,
                       int64_t num_heads, int64_t num_kv_heads) {
  const int64_t tokens = hidden.size(0), k = hidden.size(1), head_dim = key_cache.size(3), half = head_dim / 2;
  const int64_t q_width = num_heads * head_dim, kv_width = num_kv_heads * head_dim;
  const int64_t columns = q_width + 2 * kv_width;
  const Staged staged = PrepareStaging(tokens, k, weight, hidden.scalar_type());
  float* qkv = reinterpret_cast<float*>(CallerBuffer(kQkvResults, tokens * columns * sizeof(float)));
  at::Tensor q_out = at::empty({tokens, num_heads, head_dim}, hidden.options());
  const T* x = hidden.data_ptr<T>();
  const T* norm = norm_weight.data_ptr<T>();
  const T* bias_data = bias.has_value() && bias->defined() ? bias->data_ptr<T>() : nullptr;
  const float* cos_data = cos.data_ptr<float>();
  const float* sin_data = sin.data_ptr<float>();
  const int64_t* slots = slot_mapping.data_ptr<int64_t>();
  T* key_data = key_cache.data_ptr<T>();
  T* value_data = value_cache.data_ptr<T>();
  T* q_data = q_out.data_ptr<T>();
  WorkQueue panel_queue(weight.packed.size(0), MaxTeamSize());
  InTeam([&](TeamMember& member) {
    StageNormalizedRows(member, staged, x, norm, eps, k);
    MatmulPanels(member, staged, weight, panel_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
      const int64_t first = panel * kPanelWidth, count = std::min(kPanelWidth, columns - first);
      for (int64_t r = 0; r < rows; ++r) {
        float* dst = qkv + (m0 + r) * columns + first;
        for (int64_t j = 0; j < count; ++j) {
          dst[j] = c[r * kPanelWidth + j] + (bias_data ? static_cast<float>(bias_data[first + j]) : 0.0f);
        }
      }
    });
    // Rotary embedding needs whole heads, which may span panels: a second pass over tokens.
    member.Barrier();
    const auto [first_token, last_token] = member.Share(tokens);
    for (int64_t t = first_token; t < last_token; ++t) {
      const float* row = qkv + t * columns;
      const float* cos_row = cos_data + t * half;
      const float* sin_row = sin_data + t * half;
      const auto rotate = [&](const float* src, T* dst) {
        for (int64_t i = 0; i < half; ++i) {
          dst[i] = T(src[i] * cos_row[i] - src[i + half] * sin_row[i]);
          dst[i + half] = T(src[i + half] * cos_row[i] + src[i] * sin_row[i]);
        }
      };
      for (int64_t h = 0; h < num_heads; ++h) rotate(row + h * head_dim, q_data + (t * num_heads + h) * head_dim);
      T* key_slot = key_data + slots[t] * kv_width;
      T* value_slot = value_data + slots[t] * kv_width;
      for (int64_t h = 0; h < num_kv_heads; ++h) rotate(row + q_width + h * head_dim, key_slot + h * head_dim);
      for (int64_t i = 0; i < kv_width; ++i) value_slot[i] = T(row[q_width + kv_width + i]);
    }
  });
  return q_out;
}

template <typename T>
at::Tensor LinearResidualImpl(const at::Tensor& input, const PanelWeight& weight, const at::Tensor& residual) {
  const int64_t tokens = input.size(0), k = input.size(1), columns = residual.size(1);
  const Staged staged = PrepareStaging(tokens, k, weight, input.scalar_type());
  at::Tensor out = at::empty_like(residual);
  const T* x = input.data_ptr<T>();
  const T* res = residual.data_ptr<T>();
  T* out_data = out.data_ptr<T>();
  WorkQueue panel_queue(weight.packed.size(0), MaxTeamSize());
  InTeam([&](TeamMember& member) {
    StageRows<T>(member, staged, k, [&](int64_t row, T* dst) { std::copy(x + row * k, x + (row + 1) * k, dst); });
    MatmulPanels(member, staged, weight, panel_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
      const int64_t first = panel * kPanelWidth, count = std::min(kPanelWidth, columns - first);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t offset = (m0 + r) * columns + first;
        for (int64_t j = 0; j < count; ++j) {
          out_data[offset + j] = T(static_cast<float>(res[offset + j]) + c[r * kPanelWidth + j]);
        }
      }
    });
  });
  return out;
}

template <typename T>
at::Tensor GateUpSiluImpl(const at::Tensor& hidden, const at::Tensor& norm_weight, float eps, const PanelWeight& weight,
                          int64_t intermediate) {
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t tokens = hidden.size(0), k = hidden.size(1);
  const Staged staged = PrepareStaging(tokens, k, weight, hidden.scalar_type());
  at::Tensor out = at::empty({tokens, intermediate}, hidden.options());
  const T* x = hidden.data_ptr<T>();
  const T* norm = norm_weight.data_ptr<T>();
  T* out_data = out.data_ptr<T>();
  const SiluMulKernel silu_mul = SelectSiluMul();
  WorkQueue panel_queue(weight.packed.size(0), MaxTeamSize());
  InTeam([&](TeamMember& member) {
    StageNormalizedRows(member, staged, x, norm, eps, k);
    MatmulPanels(member, staged, weight, panel_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
      const int64_t first = panel * kHalf, count = std::min(kHalf, intermediate - first);
      float activated[kHalf];
      for (int64_t r = 0; r < rows; ++r) {
        T* dst = out_data + (m0 + r) * intermediate + first;
        const float* gate = c + r * kPanelWidth;
        silu_mul(gate, gate + kHalf, activated, count);
        for (int64_t j = 0; j < count; ++j) dst[j] = T(activated[j]);
      }
    });
  });
  return out;
}

// One pass over the LM head for sampling: the rows in `full_index` (row -> output row, or -1) get their full
// logits; every row's top_k largest logits are kept per team member while its panels stream by, then merged.
template <typename T>
std::tuple<at::Tensor, at::Tensor, at::Tensor> LmHeadTopKImpl(const at::Tensor& hidden, const at::Tensor& norm_weight,
                                                              float eps, const PanelWeight& weight, int64_t vocab,
                                                              const std::vector<int64_t>& full_index,
                                                              int64_t full_count, int64_t top_k) {
  const int64_t tokens = hidden.size(0), k = hidden.size(1);
  const Staged staged = PrepareStaging(tokens, k, weight, hidden.scalar_type());
  TopLogit* lists = TopLogitLists(tokens, top_k);
  int64_t* cursors = MergeCursors();
  const int team_size = MaxTeamSize();
  at::Tensor logits = at::empty({full_count, vocab}, hidden.options().dtype(at::kFloat));
  at::Tensor top_values = at::empty({tokens, top_k}, hidden.options().dtype(at::kFloat));
  at::Tensor top_ids = at::empty({tokens, top_k}, hidden.options().dtype(at::kLong));
  const T* x = hidden.data_ptr<T>();
  const T* norm = norm_weight.data_ptr<T>();
  float* out = logits.data_ptr<float>();
  float* values_out = top_values.data_ptr<float>();
  int64_t* ids_out = top_ids.data_ptr<int64_t>();
  WorkQueue panel_queue(weight.packed.size(0), MaxTeamSize());
  InTeam([&](TeamMember& member) {
    TopLogit* own = lists + static_cast<int64_t>(member.index()) * tokens * top_k;
    ClearTopLogits(own, tokens * top_k);
    StageNormalizedRows(member, staged, x, norm, eps, k);
    MatmulPanels(member, staged, weight, panel_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
      const int64_t first = panel * kPanelWidth, count = std::min(kPanelWidth, vocab - first);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row_values = c + r * kPanelWidth;
        const int64_t row = m0 + r;
        if (full_index[row] >= 0) std::copy(row_values, row_values + count, out + full_index[row] * vocab + first);
        OfferTopLogits(own + row * top_k, top_k, row_values, count, first);
      }
    });
    member.Barrier();
    const auto [first_row, last_row] = member.Share(tokens);
    int64_t* heads = cursors + static_cast<int64_t>(member.index()) * team_size;
    for (int64_t row = first_row; row < last_row; ++row) {
      MergeTopLogits(lists + row * top_k, tokens * top_k, member.size(), top_k, heads, values_out + row * top_k,
                     ids_out + row * top_k);
    }
  });
  return {logits, top_values, top_ids};
}

template <typename Fn>
auto ByDtype(const at::Tensor& tensor, Fn&& fn) {
  if (tensor.scalar_type() == at::kBFloat16) return fn(Bf16{});
  TORCH_CHECK(tensor.scalar_type() == at::kFloat, "llmc fused ops: bfloat16 or float32 activations only");
  return fn(float{});
}

}  // namespace

at::Tensor Embed(const at::Tensor& input_ids, const at::Tensor& weight, const at::Tensor& weight_scale,
                 int64_t hidden_size) {
  if (!IsPackedWeight(weight)) return composite::Embed(input_ids, weight, weight_scale, hidden_size);
  const bool int8 = weight.scalar_type() == at::kChar;
  TORCH_CHECK(!int8 || IsPackedScales(weight_scale, weight), "embed: packed int8 weight needs packed scales");
  TORCH_CHECK(PackedDepth(weight) == PaddedDepth(hidden_size), "embed: packed weight does not match hidden_size");
  const at::Tensor ids = input_ids.to(at::kLong).contiguous();
  const int64_t count = ids.numel(), vocab_capacity = weight.size(0) * kPanelWidth;
  const int64_t* id_data = ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    TORCH_CHECK(id_data[i] >= 0 && id_data[i] < vocab_capacity, "embed: token id ", id_data[i], " out of range");
  }
  // int8 rows come out in float32, as the composite and the Python reference give them.
  at::Tensor out = at::empty({count, hidden_size}, weight.options().dtype(int8 ? at::kFloat : weight.scalar_type()));
  GatherPackedColumns(weight, weight_scale, id_data, count, hidden_size, out);
  return out;
}

at::Tensor RmsNormQkvRope(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& weight,
                          const at::Tensor& weight_scale, const c10::optional<at::Tensor>& bias, const at::Tensor& cos,
                          const at::Tensor& sin, at::Tensor& key_cache, at::Tensor& value_cache,
                          const at::Tensor& slot_mapping, int64_t num_heads, int64_t num_kv_heads) {
  if (!IsPackedWeight(weight)) {
    return composite::RmsNormQkvRope(hidden, norm_weight, eps, weight, weight_scale, bias, cos, sin, key_cache,
                                     value_cache, slot_mapping, num_heads, num_kv_heads);
  }
  TORCH_CHECK(key_cache.dim() == 4 && key_cache.sizes() == value_cache.sizes() && key_cache.is_contiguous() &&
                  value_cache.is_contiguous() && key_cache.size(2) == num_kv_heads,
              "rms_norm_qkv_rope: caches must be contiguous [blocks, block_size, num_kv_heads, head_dim]");
  TORCH_CHECK(key_cache.scalar_type() == hidden.scalar_type(), "rms_norm_qkv_rope: cache dtype differs from input");
  const int64_t head_dim = key_cache.size(3), tokens = hidden.size(0);
  const PanelWeight panel_weight{weight, weight_scale};
  CheckPacked("rms_norm_qkv_rope", hidden, panel_weight, (num_heads + 2 * num_kv_heads) * head_dim);
  TORCH_CHECK(norm_weight.numel() == hidden.size(1) && norm_weight.scalar_type() == hidden.scalar_type(),
              "rms_norm_qkv_rope: norm weight must be [hidden] of the input's dtype");
  TORCH_CHECK(cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat && cos.is_contiguous() &&
                  sin.is_contiguous() && cos.numel() == tokens * (head_dim / 2) && sin.numel() == cos.numel(),
              "rms_norm_qkv_rope: cos and sin must be float32 [tokens, head_dim / 2]");
  TORCH_CHECK(
      !bias.has_value() || !bias->defined() ||
          (bias->numel() == (num_heads + 2 * num_kv_heads) * head_dim && bias->scalar_type() == hidden.scalar_type()),
      "rms_norm_qkv_rope: bias must be [q + k + v] of the input's dtype");
  TORCH_CHECK(slot_mapping.scalar_type() == at::kLong && slot_mapping.dim() == 1 && slot_mapping.size(0) == tokens,
              "rms_norm_qkv_rope: slot_mapping must be int64 [tokens]");
  const at::Tensor slots = slot_mapping.contiguous();
  const int64_t capacity = key_cache.size(0) * key_cache.size(1);
  const int64_t* slot_data = slots.data_ptr<int64_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    TORCH_CHECK(slot_data[t] >= 0 && slot_data[t] < capacity, "rms_norm_qkv_rope: slot outside the cache (", capacity,
                " slots)");
  }
  const c10::optional<at::Tensor> bias_contiguous =
      bias.has_value() && bias->defined() ? c10::optional<at::Tensor>(bias->contiguous()) : c10::nullopt;
  const at::Tensor norm = norm_weight.contiguous();
  return ByDtype(hidden, [&](auto type) {
    using T = decltype(type);
    return QkvRopeImpl<T>(hidden, norm, static_cast<float>(eps), panel_weight, bias_contiguous, cos, sin, key_cache,
                          value_cache, slots, num_heads, num_kv_heads);
  });
}

at::Tensor LinearResidual(const at::Tensor& input_in, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const at::Tensor& residual_in) {
  if (!IsPackedWeight(weight)) return composite::LinearResidual(input_in, weight, weight_scale, residual_in);
  const PanelWeight panel_weight{weight, weight_scale};
  const at::Tensor input = input_in.contiguous(), residual = residual_in.contiguous();
  CheckPacked("linear_residual", input, panel_weight, residual.size(-1));
  TORCH_CHECK(residual.dim() == 2 && residual.size(0) == input.size(0) && residual.scalar_type() == input.scalar_type(),
              "linear_residual: residual must be [tokens, out_features] of the input's dtype");
  return ByDtype(input, [&](auto type) { return LinearResidualImpl<decltype(type)>(input, panel_weight, residual); });
}

at::Tensor RmsNormGateUpSilu(const at::Tensor& hidden_in, const at::Tensor& norm_weight, double eps,
                             const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size) {
  if (!IsPackedWeight(weight)) {
    return composite::RmsNormGateUpSilu(hidden_in, norm_weight, eps, weight, weight_scale, intermediate_size);
  }
  const PanelWeight panel_weight{weight, weight_scale};
  const at::Tensor hidden = hidden_in.contiguous(), norm = norm_weight.contiguous();
  CheckPacked("rms_norm_gate_up_silu", hidden, panel_weight, 0);
  TORCH_CHECK(weight.size(0) == (intermediate_size + kPanelWidth / 2 - 1) / (kPanelWidth / 2),
              "rms_norm_gate_up_silu: packed weight is not the gate/up interleave for this intermediate size");
  TORCH_CHECK(norm.numel() == hidden.size(1) && norm.scalar_type() == hidden.scalar_type(),
              "rms_norm_gate_up_silu: norm weight must be [hidden] of the input's dtype");
  return ByDtype(hidden, [&](auto type) {
    return GateUpSiluImpl<decltype(type)>(hidden, norm, static_cast<float>(eps), panel_weight, intermediate_size);
  });
}

at::Tensor RmsNormLmHead(const at::Tensor& hidden_in, const at::Tensor& norm_weight, double eps,
                         const at::Tensor& weight, const at::Tensor& weight_scale, int64_t vocab_size) {
  if (!IsPackedWeight(weight)) {
    return composite::RmsNormLmHead(hidden_in, norm_weight, eps, weight, weight_scale, vocab_size);
  }
  const PanelWeight panel_weight{weight, weight_scale};
  const at::Tensor hidden = hidden_in.contiguous(), norm = norm_weight.contiguous();
  CheckPacked("rms_norm_lm_head", hidden, panel_weight, vocab_size);
  TORCH_CHECK(norm.numel() == hidden.size(1) && norm.scalar_type() == hidden.scalar_type(),
              "rms_norm_lm_head: norm weight must be [hidden] of the input's dtype");
  return ByDtype(hidden, [&](auto type) {
    // Every row in full, no top logits: the sampling pass with nothing to keep.
    std::vector<int64_t> every_row(hidden.size(0));
    std::iota(every_row.begin(), every_row.end(), int64_t{0});
    return std::get<0>(LmHeadTopKImpl<decltype(type)>(hidden, norm, static_cast<float>(eps), panel_weight, vocab_size,
                                                      every_row, hidden.size(0), /*top_k=*/0));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> RmsNormLmHeadTopK(const at::Tensor& hidden_in,
                                                                 const at::Tensor& norm_weight, double eps,
                                                                 const at::Tensor& weight,
                                                                 const at::Tensor& weight_scale, int64_t vocab_size,
                                                                 const at::Tensor& full_rows, int64_t top_k) {
  TORCH_CHECK(top_k >= 0 && top_k <= vocab_size, "rms_norm_lm_head_top_k: top_k must be in [0, vocab_size]");
  TORCH_CHECK(full_rows.dim() == 1 && full_rows.scalar_type() == at::kLong,
              "rms_norm_lm_head_top_k: full_rows must be int64 [rows]");
  if (!IsPackedWeight(weight)) {
    return composite::RmsNormLmHeadTopK(hidden_in, norm_weight, eps, weight, weight_scale, vocab_size, full_rows,
                                        top_k);
  }
  const PanelWeight panel_weight{weight, weight_scale};
  const at::Tensor hidden = hidden_in.contiguous(), norm = norm_weight.contiguous();
  CheckPacked("rms_norm_lm_head_top_k", hidden, panel_weight, vocab_size);
  TORCH_CHECK(norm.numel() == hidden.size(1) && norm.scalar_type() == hidden.scalar_type(),
              "rms_norm_lm_head_top_k: norm weight must be [hidden] of the input's dtype");
  const int64_t tokens = hidden.size(0);
  std::vector<int64_t> full_index(tokens, -1);
  const at::Tensor rows = full_rows.contiguous();
  const int64_t* row_data = rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows.numel(); ++i) {
    TORCH_CHECK(row_data[i] >= 0 && row_data[i] < tokens && full_index[row_data[i]] < 0,
                "rms_norm_lm_head_top_k: full_rows must name distinct rows of the input");
    full_index[row_data[i]] = i;
  }
  return ByDtype(hidden, [&](auto type) {
    return LmHeadTopKImpl<decltype(type)>(hidden, norm, static_cast<float>(eps), panel_weight, vocab_size, full_index,
                                          rows.numel(), top_k);
  });
}

void ReserveCallerBuffers(int64_t max_tokens, int64_t max_depth, int64_t qkv_columns, int64_t max_logits_rows,
                          int64_t max_top_k, at::ScalarType dtype) {
  // The AMX-INT8 staging rounds rows up to whole tile steps.
  const int64_t max_stride =
      (PaddedDepth(max_depth) + kAmxInt8StepInputs - 1) / kAmxInt8StepInputs * kAmxInt8StepInputs;
  PrepareStaging(max_tokens, max_stride, dtype);
  // int8 weights: the smallest groups (32 inputs) give the most activation scales.
  const int64_t rows_padded = (max_tokens + kRowAlign - 1) / kRowAlign * kRowAlign;
  const int64_t max_groups = PaddedDepth(max_depth) / 32 + 1;
  CallerBuffer(kActivationScales, rows_padded * max_groups * sizeof(float));
  if (ActiveInt8Activations() != Int8Activations::kInt16) {
    CallerBuffer(kActivationBytes, rows_padded * max_stride);
    CallerBuffer(kActivationOffsets, rows_padded * max_groups * sizeof(int32_t));
  }
  CallerBuffer(kQkvResults, max_tokens * qkv_columns * sizeof(float));
  TopLogitLists(max_logits_rows, max_top_k);
  MergeCursors();
}

bool EnsureFusedOpsRegistered() { return true; }

}  // namespace llmc::model::cpu

TORCH_LIBRARY_FRAGMENT(llmc, m) {
  m.def("embed(Tensor input_ids, Tensor weight, Tensor weight_scale, int hidden_size) -> Tensor");
  m.def(
      "rms_norm_qkv_rope(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
      "Tensor? bias, Tensor cos, Tensor sin, Tensor(a!) key_cache, Tensor(b!) value_cache, Tensor slot_mapping, "
      "int num_heads, int num_kv_heads) -> Tensor");
  m.def("linear_residual(Tensor input, Tensor weight, Tensor weight_scale, Tensor residual) -> Tensor");
  m.def(
      "rms_norm_gate_up_silu(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
      "int intermediate_size) -> Tensor");
  m.def(
      "rms_norm_lm_head(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
      "int vocab_size) -> Tensor");
  m.def(
      "rms_norm_lm_head_top_k(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
      "int vocab_size, Tensor full_rows, int top_k) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(llmc, CPU, m) {
  m.impl("embed", &llmc::model::cpu::Embed);
  m.impl("rms_norm_qkv_rope", &llmc::model::cpu::RmsNormQkvRope);
  m.impl("linear_residual", &llmc::model::cpu::LinearResidual);
  m.impl("rms_norm_gate_up_silu", &llmc::model::cpu::RmsNormGateUpSilu);
  m.impl("rms_norm_lm_head", &llmc::model::cpu::RmsNormLmHead);
  m.impl("rms_norm_lm_head_top_k", &llmc::model::cpu::RmsNormLmHeadTopK);
}

TORCH_LIBRARY_IMPL(llmc, CUDA, m) {
  m.impl("embed", &llmc::model::cpu::composite::Embed);
  m.impl("rms_norm_qkv_rope", &llmc::model::cpu::composite::RmsNormQkvRope);
  m.impl("linear_residual", &llmc::model::cpu::composite::LinearResidual);
  m.impl("rms_norm_gate_up_silu", &llmc::model::cpu::composite::RmsNormGateUpSilu);
  m.impl("rms_norm_lm_head", &llmc::model::cpu::composite::RmsNormLmHead);
  m.impl("rms_norm_lm_head_top_k", &llmc::model::cpu::composite::RmsNormLmHeadTopK);
}
