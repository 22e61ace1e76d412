// The fused operators as ATen compositions: correct on any device, used for CUDA and for weights that were not
// packed. tools/llmc_export/ops.py has the same math in Python.
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/mxfp4_weight.h"

#ifdef LLMC_WITH_CUDA
#include "worker/model/int4_linear_cuda.h"
#include "worker/model/int8_linear_cuda.h"
#endif

namespace llmc::model::cpu::composite {
namespace {

// x [T, heads, head_dim] rotated by the rotate-half convention; cos/sin [T, head_dim / 2].
at::Tensor Rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(2) / 2;
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor first = xf.narrow(2, 0, half), second = xf.narrow(2, half, half);
  const at::Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);
  return at::cat({first * c - second * s, second * c + first * s}, 2).to(x.scalar_type());
}

}  // namespace

at::Tensor RmsNorm(const at::Tensor& hidden, const at::Tensor& weight, double eps) {
  const at::Tensor x = hidden.to(at::kFloat);
  const at::Tensor normalized = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (normalized * weight.to(at::kFloat)).to(hidden.scalar_type());
}

bool HasWeight(const c10::optional<at::Tensor>& weight) {
  return weight.has_value() && weight->defined() && weight->numel() > 0;
}

at::Tensor Dequantize(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype) {
  if (weight_scale.numel() == 0) return weight;
  if (IsMxfp4Scales(weight_scale)) return DequantizeMxfp4(weight, weight_scale).to(dtype);
  if (weight.scalar_type() == at::kByte) {  // int4 (int4_weight.h): byte i holds inputs 2i, 2i + 1 as nibbles u
#ifdef LLMC_WITH_CUDA
    if (DequantizeInt4CudaApplies(weight, weight_scale, dtype)) return DequantizeInt4Cuda(weight, weight_scale, dtype);
#endif
    // Symmetric: scales [N, G] and W = (u - 8) * scale; with zero points [N, G, 2] and W = (u - z) * scale.
    const bool zero_points = weight_scale.dim() == 3 && weight_scale.size(2) == 2;
    TORCH_CHECK(weight.dim() == 2 && (weight_scale.dim() == 2 || zero_points) &&
                    weight_scale.size(0) == weight.size(0) && (2 * weight.size(1)) % weight_scale.size(1) == 0,
                "int4 weight [N, K / 2] needs float32 scales [N, G] (or [N, G, 2] with zero points), G dividing K");
    const at::Tensor bytes = weight.to(at::kInt);
    const at::Tensor high = at::div(bytes, 16, "floor");
    const at::Tensor u = at::stack({bytes - high * 16, high}, 2).reshape({weight.size(0), 2 * weight.size(1)});
    const int64_t group = u.size(1) / weight_scale.size(1);
    const at::Tensor scale = zero_points ? weight_scale.select(2, 0) : weight_scale;
    const at::Tensor zero =
        zero_points ? weight_scale.select(2, 1).to(at::kFloat).repeat_interleave(group, 1) : at::full({}, 8.0);
    return ((u.to(at::kFloat) - zero) * scale.to(at::kFloat).repeat_interleave(group, 1)).to(dtype);
  }
  TORCH_CHECK(weight.scalar_type() == at::kChar && weight.dim() == 2 && weight_scale.dim() == 2 &&
                  weight_scale.size(0) == weight.size(0) && weight.size(1) % weight_scale.size(1) == 0,
              "int8 weight [N, K] needs float32 scales [N, G] with G dividing K");
#ifdef LLMC_WITH_CUDA
  if (DequantizeInt8CudaApplies(weight, weight_scale, dtype)) return DequantizeInt8Cuda(weight, weight_scale, dtype);
#endif
  const int64_t group = weight.size(1) / weight_scale.size(1);
  return (weight.to(at::kFloat) * weight_scale.to(at::kFloat).repeat_interleave(group, 1)).to(dtype);
}

namespace {

// input @ W^T (+ bias) in input's dtype, W = weight or its dequantized int8 or int4: on CUDA, those go through
// Int8LinearCuda and Int4LinearCuda, which stream them once for a decode-sized batch and otherwise dequantize a
// slice at a time.
at::Tensor Project(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                   const c10::optional<at::Tensor>& bias = c10::nullopt) {
#ifdef LLMC_WITH_CUDA
  if (weight_scale.numel() != 0 && Int8LinearCudaApplies(input, weight, weight_scale)) {
    return Int8LinearCuda(input, weight, weight_scale, bias);
  }
  if (weight_scale.numel() != 0 && Int4LinearCudaApplies(input, weight, weight_scale)) {
    return Int4LinearCuda(input, weight, weight_scale, bias);
  }
#endif
  return at::linear(input, Dequantize(weight, weight_scale, input.scalar_type()), bias);
}

}  // namespace

at::Tensor Embed(const at::Tensor& input_ids, const at::Tensor& weight, const at::Tensor& weight_scale,
                 int64_t hidden_size) {
  const int64_t width = weight.scalar_type() == at::kByte ? 2 * weight.size(1) : weight.size(1);  // int4: 2 a byte
  TORCH_CHECK(weight.dim() == 2 && width == hidden_size, "embed: weight must be [vocab, hidden_size]");
  if (weight_scale.numel() == 0) return at::embedding(weight, input_ids);
  // Only the rows asked for are dequantized; float32, as the Python reference returns them.
  const at::Tensor ids = input_ids.to(at::kLong);
  return Dequantize(weight.index_select(0, ids), weight_scale.index_select(0, ids), at::kFloat);
}

at::Tensor RmsNormQkvRope(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& weight,
                          const at::Tensor& weight_scale, const c10::optional<at::Tensor>& bias, const at::Tensor& cos,
                          const at::Tensor& sin, at::Tensor& key_cache, at::Tensor& value_cache,
                          const at::Tensor& slot_mapping, int64_t num_heads, int64_t num_kv_heads,
                          const c10::optional<at::Tensor>& q_norm_weight,
                          const c10::optional<at::Tensor>& k_norm_weight) {
  const int64_t head_dim = key_cache.size(3), tokens = hidden.size(0);
  const at::Tensor qkv = Project(RmsNorm(hidden, norm_weight, eps), weight, weight_scale, bias);
  at::Tensor q = qkv.narrow(1, 0, num_heads * head_dim).reshape({tokens, num_heads, head_dim});
  at::Tensor k = qkv.narrow(1, num_heads * head_dim, num_kv_heads * head_dim).reshape({tokens, num_kv_heads, head_dim});
  // QK-norm (Qwen3): each head normalized over head_dim before RoPE.
  if (HasWeight(q_norm_weight)) q = RmsNorm(q, *q_norm_weight, eps);
  if (HasWeight(k_norm_weight)) k = RmsNorm(k, *k_norm_weight, eps);
  const at::Tensor v = qkv.narrow(1, (num_heads + num_kv_heads) * head_dim, num_kv_heads * head_dim)
                           .reshape({tokens, num_kv_heads, head_dim});
  const int64_t slots = key_cache.size(0) * key_cache.size(1);
  const at::Tensor slot_ids = slot_mapping.to(at::kLong);
  key_cache.view({slots, num_kv_heads, head_dim}).index_copy_(0, slot_ids, Rope(k, cos, sin).to(key_cache.dtype()));
  value_cache.view({slots, num_kv_heads, head_dim}).index_copy_(0, slot_ids, v.to(value_cache.dtype()));
  return Rope(q, cos, sin);
}

at::Tensor LinearResidual(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const at::Tensor& residual, const c10::optional<at::Tensor>& norm_weight, double eps,
                          const c10::optional<at::Tensor>& bias) {
  at::Tensor projected = Project(input, weight, weight_scale);
  if (HasWeight(bias)) projected = projected + *bias;
  if (!HasWeight(norm_weight)) return residual + projected;
  return residual + RmsNorm(projected, *norm_weight, eps);
}

at::Tensor RmsNormGateUpSilu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                             const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size) {
  const at::Tensor gate_up = Project(RmsNorm(hidden, norm_weight, eps), weight, weight_scale);
  return at::silu(gate_up.narrow(-1, 0, intermediate_size)) * gate_up.narrow(-1, intermediate_size, intermediate_size);
}

at::Tensor RmsNormGateUpGeluTanh(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                 const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size) {
  const at::Tensor gate_up = Project(RmsNorm(hidden, norm_weight, eps), weight, weight_scale);
  return at::gelu(gate_up.narrow(-1, 0, intermediate_size), "tanh") *
         gate_up.narrow(-1, intermediate_size, intermediate_size);
}

at::Tensor RmsNormLmHead(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& weight,
                         const at::Tensor& weight_scale, int64_t vocab_size) {
  TORCH_CHECK(weight.size(0) == vocab_size, "rms_norm_lm_head: weight has ", weight.size(0), " rows, not ", vocab_size);
  return Project(RmsNorm(hidden, norm_weight, eps), weight, weight_scale).to(at::kFloat);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> RmsNormLmHeadTopK(const at::Tensor& hidden,
                                                                 const at::Tensor& norm_weight, double eps,
                                                                 const at::Tensor& weight,
                                                                 const at::Tensor& weight_scale, int64_t vocab_size,
                                                                 const at::Tensor& full_rows, int64_t top_k) {
  const at::Tensor logits = RmsNormLmHead(hidden, norm_weight, eps, weight, weight_scale, vocab_size);
  // The k largest (on a GPU without sorting the vocabulary), then ordered by value and, among equal values,
  // by id: ids ascending first, then a stable sort by value.
  const auto [top_values, top_ids] = at::topk(logits, top_k, /*dim=*/-1, /*largest=*/true, /*sorted=*/true);
  const at::Tensor by_id = std::get<1>(at::sort(top_ids, /*stable=*/true, /*dim=*/-1, /*descending=*/false));
  const at::Tensor values_by_id = top_values.gather(1, by_id), ids_by_id = top_ids.gather(1, by_id);
  const at::Tensor order = std::get<1>(at::sort(values_by_id, /*stable=*/true, /*dim=*/-1, /*descending=*/true));
  return {logits.index_select(0, full_rows.to(logits.device())), values_by_id.gather(1, order).contiguous(),
          ids_by_id.gather(1, order).contiguous()};
}

}  // namespace llmc::model::cpu::composite
