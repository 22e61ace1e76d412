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

// Each row's chosen experts and their weights: the top_k largest of softmax(router_logits) (float32), largest
// first and equal probabilities by the lower expert index, divided by their sum when normalize_top_k.
struct ExpertChoices {
  int64_t rows = 0;
  int64_t top_k = 0;
  std::vector<int32_t> experts;  // [rows, top_k]
  std::vector<float> weights;    // [rows, top_k]
};
// router_logits: [rows, num_experts] float32, row-major. Fills `choices` (reusing its storage).
void ChooseExperts(const float* router_logits, int64_t rows, int64_t num_experts, int64_t top_k, bool normalize_top_k,
                   ExpertChoices& choices);
ExpertChoices ChooseExperts(const at::Tensor& router_logits, int64_t top_k, bool normalize_top_k);
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
// The same mixture with the routing given: each row's chosen experts and weights.
at::Tensor MoeWithChoices(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                          const ExpertChoices& choices, at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                          at::TensorList down_weights, at::TensorList down_scales, int64_t intermediate_size);
at::Tensor MoeRmsNormSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                            const at::Tensor& router_weight, at::TensorList gate_up_weights,
                            at::TensorList gate_up_scales, at::TensorList down_weights, at::TensorList down_scales,
                            int64_t top_k, bool normalize_top_k, int64_t intermediate_size);
}  // namespace composite

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_MOE_OPS_H_
