// CPU kernels of the fused operators. Each projection stages its activations and streams its weight's panels
// (panel_matmul.h); a per-panel epilogue finishes the columns they produced (bias, residual, SiLU or GELU * up, the
// LM head's top-k lists). Two finish in a second pass over whole rows: linear_residual with an output norm, and
// rms_norm_qkv_rope, which applies the per-head QK-norm (when given) and RoPE and writes the cache.
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/logit_masks.h"
#include "worker/model/cpu/moe_ops.h"
#include "worker/model/cpu/output_pool.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/panel_matmul.h"
#include "worker/model/cpu/thread_team.h"
#include "worker/model/cpu/top_logits.h"

namespace llmc::model::cpu {
namespace {

using Bf16 = c10::BFloat16;

// out = activation(gate) * up over a panel's columns.
using GatedActivationKernel = void (*)(const float*, const float*, float*, int64_t);

enum class GateActivation { kSilu, kGeluTanh };

GatedActivationKernel SelectGatedActivation(GateActivation activation) {
  const bool silu = activation == GateActivation::kSilu;
#ifdef LLMC_CPU_X86_KERNELS
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512Bf16) return silu ? &SiluMulAvx512 : &GeluTanhMulAvx512;
  if (isa >= CpuIsa::kAvx2) return silu ? &SiluMulAvx2 : &GeluTanhMulAvx2;
#endif
  return silu ? &SiluMulPortable : &GeluTanhMulPortable;
}

// Rows of float results into bfloat16 outputs, vectorized for this CPU (the epilogues' share of a prefill).
struct Bf16RowKernels {
  void (*round)(const float* src, uint16_t* dst, int64_t count);
  void (*add)(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count);
};

Bf16RowKernels SelectBf16RowKernels() {
#ifdef LLMC_CPU_X86_KERNELS
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512Bf16) return {&RoundRowToBf16Avx512, &AddRowToBf16Avx512};
  if (isa >= CpuIsa::kAvx2) return {&RoundRowToBf16Avx2, &AddRowToBf16Avx2};
#endif
  return {&RoundRowToBf16Portable, &AddRowToBf16Portable};
}

// The same rows for float32 outputs (reference packages), and bfloat16 through the vectorized kernels.
void StoreRow(const Bf16RowKernels&, const float* values, float* dst, int64_t count) {
  std::copy(values, values + count, dst);
}
void StoreRow(const Bf16RowKernels& kernels, const float* values, Bf16* dst, int64_t count) {
  kernels.round(values, reinterpret_cast<uint16_t*>(dst), count);
}
void AddRow(const Bf16RowKernels&, const float* residual, const float* values, float* dst, int64_t count) {
  for (int64_t j = 0; j < count; ++j) dst[j] = residual[j] + values[j];
}
void AddRow(const Bf16RowKernels& kernels, const Bf16* residual, const float* values, Bf16* dst, int64_t count) {
  kernels.add(reinterpret_cast<const uint16_t*>(residual), values, reinterpret_cast<uint16_t*>(dst), count);
}

// Each member's top-k lists for every row, then each member's merge cursors (one per member's list).
TopLogit* TopLogitLists(int64_t rows, int64_t top_k) {
  return reinterpret_cast<TopLogit*>(CallerBuffer(
      kTopLogitLists, static_cast<size_t>(MaxTeamSize()) * rows * std::max<int64_t>(top_k, 1) * sizeof(TopLogit)));
}
int64_t* MergeCursors() {
  return reinterpret_cast<int64_t*>(
      CallerBuffer(kMergeCursors, static_cast<size_t>(MaxTeamSize()) * MaxTeamSize() * sizeof(int64_t)));
}

template <typename T>
at::Tensor QkvRopeImpl(const at::Tensor& hidden, const at::Tensor& norm_weight, float eps, const PanelWeight& weight,
                       const c10::optional<at::Tensor>& bias, const at::Tensor& cos, const at::Tensor& sin,
                       at::Tensor& key_cache, at::Tensor& value_cache, const at::Tensor& slot_mapping,
                       int64_t num_heads, int64_t num_kv_heads, const T* q_norm, const T* k_norm) {
  const int64_t tokens = hidden.size(0), k = hidden.size(1), head_dim = key_cache.size(3), half = head_dim / 2;
  const int64_t q_width = num_heads * head_dim, kv_width = num_kv_heads * head_dim;
  const int64_t columns = q_width + 2 * kv_width;
  const Staged staged = PrepareStagingReadingAhead(tokens, k, weight, hidden.scalar_type());
  float* qkv = reinterpret_cast<float*>(CallerBuffer(kQkvResults, tokens * columns * sizeof(float)));
  at::Tensor q_out = RecycledEmpty(kQueryOutput, {tokens, num_heads, head_dim}, hidden.scalar_type());
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
      // QK-norm: the head's RMSNorm (in float, as the head came out of the projection) folded into the rotation.
      const auto normalize_rotate = [&](const float* src, const T* head_norm, T* dst) {
        float sum = 0.0f;
        for (int64_t i = 0; i < head_dim; ++i) sum += src[i] * src[i];
        const float inverse_rms = 1.0f / std::sqrt(sum / static_cast<float>(head_dim) + eps);
        for (int64_t i = 0; i < half; ++i) {
          const float a = src[i] * inverse_rms * static_cast<float>(head_norm[i]);
          const float b = src[i + half] * inverse_rms * static_cast<float>(head_norm[i + half]);
          dst[i] = T(a * cos_row[i] - b * sin_row[i]);
          dst[i + half] = T(b * cos_row[i] + a * sin_row[i]);
        }
      };
      const auto head = [&](const float* src, const T* head_norm, T* dst) {
        if (head_norm != nullptr) {
          normalize_rotate(src, head_norm, dst);
        } else {
          rotate(src, dst);
        }
      };
      for (int64_t h = 0; h < num_heads; ++h) head(row + h * head_dim, q_norm, q_data + (t * num_heads + h) * head_dim);
      T* key_slot = key_data + slots[t] * kv_width;
      T* value_slot = value_data + slots[t] * kv_width;
      for (int64_t h = 0; h < num_kv_heads; ++h) head(row + q_width + h * head_dim, k_norm, key_slot + h * head_dim);
      for (int64_t i = 0; i < kv_width; ++i) value_slot[i] = T(row[q_width + kv_width + i]);
    }
  });
  return q_out;
}

// residual + input @ W^T; with `norm` (Gemma 3's output norm), the projection's rows are kept (rounded to T, as
// the projection's output is) until every panel is done, then RMS-normalized, scaled and added in a second pass.
template <typename T>
at::Tensor LinearResidualImpl(const at::Tensor& input, int64_t k, const PanelWeight& weight, const at::Tensor& residual,
                              const T* norm, float eps, const T* bias) {
  const int64_t tokens = input.size(0), columns = residual.size(1);
  const Staged staged = PrepareStagingReadingAhead(tokens, k, weight, input.scalar_type());
  at::Tensor out = RecycledEmpty(kResidualOutput, residual.sizes(), residual.scalar_type());
  const T* x = input.data_ptr<T>();
  const T* res = residual.data_ptr<T>();
  T* out_data = out.data_ptr<T>();
  float* projected =
      norm != nullptr ? reinterpret_cast<float*>(CallerBuffer(kQkvResults, tokens * columns * sizeof(float))) : nullptr;
  const Bf16RowKernels row_kernels = SelectBf16RowKernels();
  WorkQueue panel_queue(weight.packed.size(0), MaxTeamSize());
  InTeam([&](TeamMember& member) {
    StageRows<T>(member, staged, k, [&](int64_t row, T* dst) { std::copy(x + row * k, x + (row + 1) * k, dst); });
    MatmulPanels(member, staged, weight, panel_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
      const int64_t first = panel * kPanelWidth, count = std::min(kPanelWidth, columns - first);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t offset = (m0 + r) * columns + first;
        const float* values = c + r * kPanelWidth;
        float biased[kPanelWidth];
        if (bias != nullptr) {  // GPT-OSS's o_proj
          for (int64_t j = 0; j < count; ++j) biased[j] = values[j] + static_cast<float>(bias[first + j]);
          values = biased;
        }
        if (projected != nullptr) {
          for (int64_t j = 0; j < count; ++j) projected[offset + j] = static_cast<float>(T(values[j]));
          continue;
        }
        AddRow(row_kernels, res + offset, values, out_data + offset, count);
      }
    });
    if (projected == nullptr) return;
    member.Barrier();
    const auto [first_token, last_token] = member.Share(tokens);
    for (int64_t t = first_token; t < last_token; ++t) {
      const float* row = projected + t * columns;
      float sum = 0.0f;
      for (int64_t j = 0; j < columns; ++j) sum += row[j] * row[j];
      const float inverse_rms = 1.0f / std::sqrt(sum / static_cast<float>(columns) + eps);
      for (int64_t j = 0; j < columns; ++j) {
        const T normalized(row[j] * inverse_rms * static_cast<float>(norm[j]));
        out_data[t * columns + j] = T(static_cast<float>(res[t * columns + j]) + static_cast<float>(normalized));
      }
    }
  });
  return out;
}

template <typename T>
at::Tensor GateUpImpl(const at::Tensor& hidden, const at::Tensor& norm_weight, float eps, const PanelWeight& weight,
                      int64_t intermediate, GateActivation activation) {
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t tokens = hidden.size(0), k = hidden.size(1);
  const Staged staged = PrepareStagingReadingAhead(tokens, k, weight, hidden.scalar_type());
  at::Tensor out = RecycledEmpty(kGatedOutput, {tokens, intermediate}, hidden.scalar_type());
  const T* x = hidden.data_ptr<T>();
  const T* norm = norm_weight.data_ptr<T>();
  T* out_data = out.data_ptr<T>();
  const GatedActivationKernel activate = SelectGatedActivation(activation);
  const Bf16RowKernels row_kernels = SelectBf16RowKernels();
  WorkQueue panel_queue(weight.packed.size(0), MaxTeamSize());
  InTeam([&](TeamMember& member) {
    StageNormalizedRows(member, staged, x, norm, eps, k);
    MatmulPanels(member, staged, weight, panel_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
      const int64_t first = panel * kHalf, count = std::min(kHalf, intermediate - first);
      float activated[kHalf];
      for (int64_t r = 0; r < rows; ++r) {
        T* dst = out_data + (m0 + r) * intermediate + first;
        const float* gate = c + r * kPanelWidth;
        activate(gate, gate + kHalf, activated, count);
        StoreRow(row_kernels, activated, dst, count);
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
  const Staged staged = PrepareStagingReadingAhead(tokens, k, weight, hidden.scalar_type());
  TopLogit* lists = TopLogitLists(tokens, top_k);
  // Read here, on the thread that runs the graph (the team's threads do not see its thread-locals).
  const std::vector<const uint64_t*>* const masks = CurrentLogitMasks();
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
        const uint64_t* mask = masks != nullptr && row < static_cast<int64_t>(masks->size()) ? (*masks)[row] : nullptr;
        if (mask == nullptr) {
          OfferTopLogits(own + row * top_k, top_k, row_values, count, first);
          continue;
        }
        // NaN never enters a top list: a disallowed token cannot be ranked.
        float allowed_values[kPanelWidth];
        for (int64_t j = 0; j < count; ++j) {
          const int64_t id = first + j;
          allowed_values[j] =
              (mask[id >> 6] >> (id & 63)) & 1 ? row_values[j] : std::numeric_limits<float>::quiet_NaN();
        }
        OfferTopLogits(own + row * top_k, top_k, allowed_values, count, first);
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
  // int8 and int4 (kByte) weights are dequantized with their scales.
  const bool int8 = weight.scalar_type() == at::kChar || weight.scalar_type() == at::kByte;
  TORCH_CHECK(!int8 || (weight.scalar_type() == at::kByte ? IsPackedInt4Scales(weight_scale, weight)
                                                          : IsPackedScales(weight_scale, weight)),
              "embed: packed quantized weight needs packed scales");
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
                          const at::Tensor& slot_mapping, int64_t num_heads, int64_t num_kv_heads,
                          const c10::optional<at::Tensor>& q_norm_weight,
                          const c10::optional<at::Tensor>& k_norm_weight) {
  if (!IsPackedWeight(weight)) {
    return composite::RmsNormQkvRope(hidden, norm_weight, eps, weight, weight_scale, bias, cos, sin, key_cache,
                                     value_cache, slot_mapping, num_heads, num_kv_heads, q_norm_weight, k_norm_weight);
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
  // The QK-norm weights, contiguous, or undefined when absent.
  const auto head_norm = [&](const c10::optional<at::Tensor>& weight, const char* name) {
    if (!composite::HasWeight(weight)) return at::Tensor();
    TORCH_CHECK(weight->numel() == head_dim && weight->scalar_type() == hidden.scalar_type(),
                "rms_norm_qkv_rope: ", name, " must be [head_dim] of the input's dtype");
    return weight->contiguous();
  };
  const at::Tensor q_norm = head_norm(q_norm_weight, "q_norm_weight");
  const at::Tensor k_norm = head_norm(k_norm_weight, "k_norm_weight");
  return ByDtype(hidden, [&](auto type) {
    using T = decltype(type);
    return QkvRopeImpl<T>(hidden, norm, static_cast<float>(eps), panel_weight, bias_contiguous, cos, sin, key_cache,
                          value_cache, slots, num_heads, num_kv_heads,
                          q_norm.defined() ? q_norm.data_ptr<T>() : nullptr,
                          k_norm.defined() ? k_norm.data_ptr<T>() : nullptr);
  });
}

at::Tensor LinearResidual(const at::Tensor& input_in, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const at::Tensor& residual_in, const c10::optional<at::Tensor>& norm_weight, double eps,
                          const c10::optional<at::Tensor>& bias_in) {
  if (!IsPackedWeight(weight)) {
    return composite::LinearResidual(input_in.dim() == 3 ? input_in.flatten(1) : input_in, weight, weight_scale,
                                     residual_in, norm_weight, eps, bias_in);
  }
  const bool has_bias = composite::HasWeight(bias_in);
  TORCH_CHECK(
      !has_bias || (bias_in->numel() == residual_in.size(-1) && bias_in->scalar_type() == input_in.scalar_type()),
      "linear_residual: bias must be [out_features] of the input's dtype");
  const at::Tensor bias = has_bias ? bias_in->contiguous() : at::Tensor();
  const PanelWeight panel_weight{weight, weight_scale};
  const at::Tensor input = input_in.contiguous(), residual = residual_in.contiguous();
  // The attention's output [tokens, heads, head_dim] is taken as it lies, [tokens, heads * head_dim]
  // (operator_graph_passes.h drops the reshape between them).
  TORCH_CHECK(input.dim() == 2 || input.dim() == 3,
              "linear_residual: input must be [tokens, features] or [tokens, heads, head_dim]");
  const int64_t features = input.dim() == 3 ? input.size(1) * input.size(2) : input.size(1);
  CheckPacked("linear_residual", features, input.scalar_type(), panel_weight, residual.size(-1));
  TORCH_CHECK(residual.dim() == 2 && residual.size(0) == input.size(0) && residual.scalar_type() == input.scalar_type(),
              "linear_residual: residual must be [tokens, out_features] of the input's dtype");
  at::Tensor norm;
  if (composite::HasWeight(norm_weight)) {
    TORCH_CHECK(norm_weight->numel() == residual.size(1) && norm_weight->scalar_type() == input.scalar_type(),
                "linear_residual: norm_weight must be [out_features] of the input's dtype");
    norm = norm_weight->contiguous();
  }
  return ByDtype(input, [&](auto type) {
    using T = decltype(type);
    return LinearResidualImpl<T>(input, features, panel_weight, residual, norm.defined() ? norm.data_ptr<T>() : nullptr,
                                 static_cast<float>(eps), bias.defined() ? bias.data_ptr<T>() : nullptr);
  });
}

namespace {

at::Tensor RmsNormGateUp(const char* name, const at::Tensor& hidden_in, const at::Tensor& norm_weight, double eps,
                         const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size,
                         GateActivation activation) {
  const PanelWeight panel_weight{weight, weight_scale};
  const at::Tensor hidden = hidden_in.contiguous(), norm = norm_weight.contiguous();
  CheckPacked(name, hidden, panel_weight, 0);
  TORCH_CHECK(weight.size(0) == (intermediate_size + kPanelWidth / 2 - 1) / (kPanelWidth / 2), name,
              ": packed weight is not the gate/up interleave for this intermediate size");
  TORCH_CHECK(norm.numel() == hidden.size(1) && norm.scalar_type() == hidden.scalar_type(), name,
              ": norm weight must be [hidden] of the input's dtype");
  return ByDtype(hidden, [&](auto type) {
    return GateUpImpl<decltype(type)>(hidden, norm, static_cast<float>(eps), panel_weight, intermediate_size,
                                      activation);
  });
}

}  // namespace

at::Tensor RmsNormGateUpSilu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                             const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size) {
  if (!IsPackedWeight(weight)) {
    return composite::RmsNormGateUpSilu(hidden, norm_weight, eps, weight, weight_scale, intermediate_size);
  }
  return RmsNormGateUp("rms_norm_gate_up_silu", hidden, norm_weight, eps, weight, weight_scale, intermediate_size,
                       GateActivation::kSilu);
}

at::Tensor RmsNormGateUpGeluTanh(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                 const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size) {
  if (!IsPackedWeight(weight)) {
    return composite::RmsNormGateUpGeluTanh(hidden, norm_weight, eps, weight, weight_scale, intermediate_size);
  }
  return RmsNormGateUp("rms_norm_gate_up_gelu_tanh", hidden, norm_weight, eps, weight, weight_scale, intermediate_size,
                       GateActivation::kGeluTanh);
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
  ReserveStaging(max_tokens, max_depth, dtype);
  CallerBuffer(kQkvResults, max_tokens * qkv_columns * sizeof(float));
  TopLogitLists(max_logits_rows, max_top_k);
  MergeCursors();
}

bool EnsureFusedOpsRegistered() { return EnsureMoeOpsRegistered(); }

}  // namespace llmc::model::cpu

TORCH_LIBRARY_FRAGMENT(llmc, m) {
  m.def("embed(Tensor input_ids, Tensor weight, Tensor weight_scale, int hidden_size) -> Tensor");
  m.def(
      "rms_norm_qkv_rope(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
      "Tensor? bias, Tensor cos, Tensor sin, Tensor(a!) key_cache, Tensor(b!) value_cache, Tensor slot_mapping, "
      "int num_heads, int num_kv_heads, Tensor? q_norm_weight=None, Tensor? k_norm_weight=None) -> Tensor");
  m.def(
      "linear_residual(Tensor input, Tensor weight, Tensor weight_scale, Tensor residual, Tensor? norm_weight=None, "
      "float eps=1e-06, Tensor? bias=None) -> Tensor");
  m.def(
      "rms_norm_gate_up_silu(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
      "int intermediate_size) -> Tensor");
  m.def(
      "rms_norm_gate_up_gelu_tanh(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
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
  m.impl("rms_norm_gate_up_gelu_tanh", &llmc::model::cpu::RmsNormGateUpGeluTanh);
  m.impl("rms_norm_lm_head", &llmc::model::cpu::RmsNormLmHead);
  m.impl("rms_norm_lm_head_top_k", &llmc::model::cpu::RmsNormLmHeadTopK);
}

TORCH_LIBRARY_IMPL(llmc, CUDA, m) {
  m.impl("embed", &llmc::model::cpu::composite::Embed);
  m.impl("rms_norm_qkv_rope", &llmc::model::cpu::composite::RmsNormQkvRope);
  m.impl("linear_residual", &llmc::model::cpu::composite::LinearResidual);
  m.impl("rms_norm_gate_up_silu", &llmc::model::cpu::composite::RmsNormGateUpSilu);
  m.impl("rms_norm_gate_up_gelu_tanh", &llmc::model::cpu::composite::RmsNormGateUpGeluTanh);
  m.impl("rms_norm_lm_head", &llmc::model::cpu::composite::RmsNormLmHead);
  m.impl("rms_norm_lm_head_top_k", &llmc::model::cpu::composite::RmsNormLmHeadTopK);
}
