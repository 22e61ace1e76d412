#ifndef LLMC_WORKER_MODEL_CPU_MOE_OPS_H_
#define LLMC_WORKER_MODEL_CPU_MOE_OPS_H_

// The mixture-of-experts operator of format-12 packages (schema and Python reference in
// tools/llmc_export/ops.py: moe_rms_norm_swiglu; docs/model-package.md). The CPU kernel routes the batch's rows,
// gathers each chosen expert's rows and streams that expert's packed gate/up and down weights once for all of
// them; experts no row chose are never read. The composite serves CUDA and unpacked weights.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace llmc::model::cpu {

// What distinguishes one family's mixture from another's. Qwen3-MoE and Mixtral: softmax over all router logits,
// the top_k probabilities (renormalized when normalize_top_k), SiLU experts without biases. GPT-OSS: the router has a
// bias, its top_k logits are chosen first and softmaxed among themselves, and the experts have biases (gate_up
// [2 I]: gate then up; down [H]) and a clamped SwiGLU: (clamp(up, ±limit) + 1) · g · σ(alpha · g), g = min(gate,
// limit).
struct MoeVariant {
  int64_t top_k = 1;
  int64_t intermediate_size = 0;
  bool normalize_top_k = false;
  bool softmax_after_top_k = false;
  at::Tensor router_bias;         // undefined: none
  at::TensorList gate_up_biases;  // empty: none
  at::TensorList down_biases;     // empty: none
  bool clamped_swiglu = false;
  float alpha = 1.702f;
  float limit = 7.0f;
};

// Each row's chosen experts and their weights: the top_k largest of softmax(router_logits) (float32), largest
// first and equal probabilities by the lower expert index, divided by their sum when normalize_top_k; or, with
// softmax_after_top_k, the top_k largest logits (the same order) and the softmax of those alone.
struct ExpertChoices {
  int64_t rows = 0;
  int64_t top_k = 0;
  std::vector<int32_t> experts;  // [rows, top_k]
  std::vector<float> weights;    // [rows, top_k]
};
// router_logits: [rows, num_experts] float32, row-major. Fills `choices` (reusing its storage).
void ChooseExperts(const float* router_logits, int64_t rows, int64_t num_experts, int64_t top_k, bool normalize_top_k,
                   ExpertChoices& choices, bool softmax_after_top_k = false);
ExpertChoices ChooseExperts(const at::Tensor& router_logits, int64_t top_k, bool normalize_top_k,
                            bool softmax_after_top_k = false);
// The choices the calling thread's last moe_rms_norm_swiglu made on the CPU kernels (tests check them).
const ExpertChoices& LastExpertChoices();

// The rows each expert received, grouped by expert: rows of expert e are entries offsets[e] .. offsets[e + 1] - 1
// of `rows` (ascending) with their routing weights in `weights`.
struct ExpertGroups {
  std::vector<int64_t> offsets;  // [num_experts + 1]
  std::vector<int64_t> rows;
  std::vector<float> weights;
  std::vector<int64_t> entry_of_choice;  // [rows, top_k]: where row r's i-th choice is among the entries
  int64_t active_experts = 0;            // experts with at least one row
};
void GroupByExpert(const ExpertChoices& choices, int64_t num_experts, ExpertGroups& groups);
ExpertGroups GroupByExpert(const ExpertChoices& choices, int64_t num_experts);

// hidden + MoE(RMSNorm(hidden) * norm_weight): router_weight [E, H] in the activations' dtype (packed by the
// loader with the experts, never quantized: its logits are rounded to the activations' dtype as Hugging Face's
// are); expert e's gate_up_weights[e] ([2 I, H], [gate; up]) and down_weights[e] ([H, I]) plain, int8 or int4 with
// their scales, or packed by the loader (all experts alike).
at::Tensor MoeRmsNormSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                            const at::Tensor& router_weight, at::TensorList gate_up_weights,
                            at::TensorList gate_up_scales, at::TensorList down_weights, at::TensorList down_scales,
                            int64_t top_k, bool normalize_top_k, int64_t intermediate_size);

// GPT-OSS's mixture (MoeVariant): hidden + MoE(RMSNorm(hidden) * norm_weight) with the router's bias, top-k then
// softmax, the experts' biases and the clamped SwiGLU.
at::Tensor MoeRmsNormClampedSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                   const at::Tensor& router_weight, const at::Tensor& router_bias,
                                   at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                                   at::TensorList gate_up_biases, at::TensorList down_weights,
                                   at::TensorList down_scales, at::TensorList down_biases, int64_t top_k,
                                   int64_t intermediate_size, double alpha, double limit);

// Experts that at least one row chose, summed over the sparse layers, since the calling thread last asked
// (the profile's per-step count); resets it.
int64_t TakeActiveExpertCount();
void CountActiveExperts(int64_t experts);

// Whether the chosen experts run in one team job (the default) or two jobs each (what AMX tile stagings always
// use); for tests and benchmarks, per calling thread.
void SetExpertsInOneJob(bool one_job);

// Registration happens when this object is linked in; EnsureFusedOpsRegistered calls this to guarantee it.
bool EnsureMoeOpsRegistered();

namespace composite {
// The same mixture with the routing given: each row's chosen experts and weights (the variant's experts).
at::Tensor MoeWithChoices(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                          const ExpertChoices& choices, at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                          at::TensorList down_weights, at::TensorList down_scales, const MoeVariant& variant);
at::Tensor Moe(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& router_weight,
               at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
               at::TensorList down_scales, const MoeVariant& variant);
at::Tensor MoeRmsNormClampedSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                   const at::Tensor& router_weight, const at::Tensor& router_bias,
                                   at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                                   at::TensorList gate_up_biases, at::TensorList down_weights,
                                   at::TensorList down_scales, at::TensorList down_biases, int64_t top_k,
                                   int64_t intermediate_size, double alpha, double limit);
at::Tensor MoeRmsNormSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                            const at::Tensor& router_weight, at::TensorList gate_up_weights,
                            at::TensorList gate_up_scales, at::TensorList down_weights, at::TensorList down_scales,
                            int64_t top_k, bool normalize_top_k, int64_t intermediate_size);
}  // namespace composite

// The variants the two schemas stand for.
MoeVariant SoftmaxTopKVariant(int64_t top_k, bool normalize_top_k, int64_t intermediate_size);
MoeVariant ClampedSwigluVariant(const at::Tensor& router_bias, at::TensorList gate_up_biases,
                                at::TensorList down_biases, int64_t top_k, int64_t intermediate_size, double alpha,
                                double limit);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_MOE_OPS_H_
