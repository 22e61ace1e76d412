#ifndef LLMC_WORKER_MODEL_CPU_FUSED_OPS_H_
#define LLMC_WORKER_MODEL_CPU_FUSED_OPS_H_

// The fused decoder operators of model packages from format 3 on (schemas in tools/llmc_export/ops.py,
// documented in docs/model-package.md). Each has a CPU kernel that takes weights packed by the loader
// (packed_weight.h) and streams them once for every row of the batch, and a composite ATen implementation
// used for unpacked weights and registered for CUDA. Every projection comes with its weight_scale: empty for a
// weight in the activations' dtype; for int8 weights, float32 scales [N, G] beside the int8 [N, K] matrix
// (packed_weight.h: QuantizeInt8), or both packed.
#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <tuple>

namespace llmc::model::cpu {

// Registration happens when this object is linked in; the loader calls this to guarantee it.
bool EnsureFusedOpsRegistered();

// The operators keep their staging buffers per calling thread and grow them for a larger batch than any
// before. The thread that runs the model calls this once before its first step, sized for the largest step
// (tokens, input features, q/k/v columns, logits rows and top-k), so no step allocates them.
void ReserveCallerBuffers(int64_t max_tokens, int64_t max_depth, int64_t qkv_columns, int64_t max_logits_rows,
                          int64_t max_top_k, at::ScalarType dtype);

// embed(input_ids [T], weight [V, H] or packed, hidden_size) -> [T, H]
at::Tensor Embed(const at::Tensor& input_ids, const at::Tensor& weight, const at::Tensor& weight_scale,
                 int64_t hidden_size);

// RMSNorm(hidden) -> QKV projection (+ bias) -> RoPE on q and k (cos/sin: [T, head_dim / 2] float32) -> k and v
// written to their cache slots. Returns q [T, num_heads, head_dim]. With q_norm_weight / k_norm_weight ([head_dim]
// of the input's dtype; absent or empty: none), each head of q / k is RMS-normalized (same eps) before RoPE:
// Qwen3's QK-norm.
at::Tensor RmsNormQkvRope(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& weight,
                          const at::Tensor& weight_scale, const c10::optional<at::Tensor>& bias, const at::Tensor& cos,
                          const at::Tensor& sin, at::Tensor& key_cache, at::Tensor& value_cache,
                          const at::Tensor& slot_mapping, int64_t num_heads, int64_t num_kv_heads,
                          const c10::optional<at::Tensor>& q_norm_weight = c10::nullopt,
                          const c10::optional<at::Tensor>& k_norm_weight = c10::nullopt);

// residual + input @ weight^T (+ bias: GPT-OSS's o_proj, [out_features] of the input's dtype); with norm_weight
// ([out_features] of the input's dtype), residual + RMSNorm(input @ weight^T) * norm_weight: Gemma 3's output norms
// (the projection rounded to the input's dtype before the norm, as Hugging Face's layer computes it). input is
// [T, K]; the CPU kernel also takes the attention's output [T, heads, head_dim] as [T, heads * head_dim].
at::Tensor LinearResidual(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const at::Tensor& residual, const c10::optional<at::Tensor>& norm_weight = c10::nullopt,
                          double eps = 1e-6, const c10::optional<at::Tensor>& bias = c10::nullopt);

// SiLU(RMSNorm(hidden) @ gate^T) * (RMSNorm(hidden) @ up^T); weight is [gate; up] ([2 I, H]) or packed.
at::Tensor RmsNormGateUpSilu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                             const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size);

// The same with GELU's tanh form in place of SiLU (Gemma 3's GeGLU, gelu_pytorch_tanh).
at::Tensor RmsNormGateUpGeluTanh(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                 const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size);

// float32 logits of RMSNorm(hidden) @ weight^T: [T, vocab_size].
at::Tensor RmsNormLmHead(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& weight,
                         const at::Tensor& weight_scale, int64_t vocab_size);

// One pass of the LM head for sampling: (float32 logits [F, vocab] of the rows named by full_rows (int64 [F],
// distinct), the top_k largest logits of every row [T, top_k] float32, largest first and equal values by lower
// id, and their ids [T, top_k] int64).
std::tuple<at::Tensor, at::Tensor, at::Tensor> RmsNormLmHeadTopK(const at::Tensor& hidden,
                                                                 const at::Tensor& norm_weight, double eps,
                                                                 const at::Tensor& weight,
                                                                 const at::Tensor& weight_scale, int64_t vocab_size,
                                                                 const at::Tensor& full_rows, int64_t top_k);

// The composite (ATen) versions of the same operators: the CUDA kernels, the CPU path for unpacked weights,
// and the reference in tests.
namespace composite {
// RMSNorm(hidden) * weight in float32, rounded once to hidden's dtype (ops.py's rms_norm_reference).
at::Tensor RmsNorm(const at::Tensor& hidden, const at::Tensor& weight, double eps);
// Whether an optional weight operand is given (absent, undefined or empty: not).
bool HasWeight(const c10::optional<at::Tensor>& weight);
// The matrix a projection multiplies by: `weight` itself, or an int8 weight times its scales, in `dtype`.
at::Tensor Dequantize(const at::Tensor& weight, const at::Tensor& weight_scale, at::ScalarType dtype);
at::Tensor Embed(const at::Tensor& input_ids, const at::Tensor& weight, const at::Tensor& weight_scale,
                 int64_t hidden_size);
at::Tensor RmsNormQkvRope(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& weight,
                          const at::Tensor& weight_scale, const c10::optional<at::Tensor>& bias, const at::Tensor& cos,
                          const at::Tensor& sin, at::Tensor& key_cache, at::Tensor& value_cache,
                          const at::Tensor& slot_mapping, int64_t num_heads, int64_t num_kv_heads,
                          const c10::optional<at::Tensor>& q_norm_weight = c10::nullopt,
                          const c10::optional<at::Tensor>& k_norm_weight = c10::nullopt);
at::Tensor LinearResidual(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const at::Tensor& residual, const c10::optional<at::Tensor>& norm_weight = c10::nullopt,
                          double eps = 1e-6, const c10::optional<at::Tensor>& bias = c10::nullopt);
at::Tensor RmsNormGateUpSilu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                             const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size);
at::Tensor RmsNormGateUpGeluTanh(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                 const at::Tensor& weight, const at::Tensor& weight_scale, int64_t intermediate_size);
at::Tensor RmsNormLmHead(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& weight,
                         const at::Tensor& weight_scale, int64_t vocab_size);
std::tuple<at::Tensor, at::Tensor, at::Tensor> RmsNormLmHeadTopK(const at::Tensor& hidden,
                                                                 const at::Tensor& norm_weight, double eps,
                                                                 const at::Tensor& weight,
                                                                 const at::Tensor& weight_scale, int64_t vocab_size,
                                                                 const at::Tensor& full_rows, int64_t top_k);
}  // namespace composite

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_FUSED_OPS_H_
