// The mixture-of-experts operator as an ATen composition: CUDA, unpacked weights, and the reference the CPU
// kernel is tested against. Routing is the kernel's (ChooseExperts on the router's float32 logits, copied to the
// host), so both choose the same experts; each chosen expert then runs on its gathered rows.
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/moe_ops.h"

namespace llmc::model::cpu::composite {
namespace {

at::Tensor NormalizedRows(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps) {
  const at::Tensor x = hidden.to(at::kFloat);
  return (x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * norm_weight.to(at::kFloat))
      .to(hidden.scalar_type());
}

at::Tensor Mixture(const at::Tensor& hidden, const at::Tensor& normalized, const ExpertGroups& groups,
                   at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
                   at::TensorList down_scales, int64_t intermediate_size) {
  TORCH_CHECK(gate_up_scales.size() == gate_up_weights.size() && down_weights.size() == gate_up_weights.size() &&
                  down_scales.size() == gate_up_weights.size() && groups.offsets.size() == gate_up_weights.size() + 1,
              "moe_rms_norm_swiglu: every expert needs its gate_up and down weights and scales");
  const at::ScalarType dtype = hidden.scalar_type();
  CountActiveExperts(groups.active_experts);
  at::Tensor mixed = at::zeros_like(hidden);
  const auto index_options = at::TensorOptions().dtype(at::kLong);
  const auto weight_options = at::TensorOptions().dtype(at::kFloat);
  for (size_t expert = 0; expert < gate_up_weights.size(); ++expert) {
    const int64_t first = groups.offsets[expert], count = groups.offsets[expert + 1] - first;
    if (count == 0) continue;
    const at::Tensor rows =
        at::from_blob(const_cast<int64_t*>(groups.rows.data() + first), {count}, index_options).to(hidden.device());
    const at::Tensor weights = at::from_blob(const_cast<float*>(groups.weights.data() + first), {count}, weight_options)
                                   .to(hidden.device())
                                   .to(dtype);
    const at::Tensor gate_up = at::linear(normalized.index_select(0, rows),
                                          Dequantize(gate_up_weights[expert], gate_up_scales[expert], dtype));
    const at::Tensor activated =
        at::silu(gate_up.narrow(1, 0, intermediate_size)) * gate_up.narrow(1, intermediate_size, intermediate_size);
    const at::Tensor out = at::linear(activated, Dequantize(down_weights[expert], down_scales[expert], dtype));
    mixed.index_add_(0, rows, out * weights.unsqueeze(1));
  }
  return hidden + mixed;
}

}  // namespace

at::Tensor MoeWithChoices(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                          const ExpertChoices& choices, at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                          at::TensorList down_weights, at::TensorList down_scales, int64_t intermediate_size) {
  TORCH_CHECK(choices.rows == hidden.size(0), "moe: one routing choice per row");
  return Mixture(hidden, NormalizedRows(hidden, norm_weight, eps),
                 GroupByExpert(choices, static_cast<int64_t>(gate_up_weights.size())), gate_up_weights, gate_up_scales,
                 down_weights, down_scales, intermediate_size);
}

at::Tensor MoeRmsNormSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                            const at::Tensor& router_weight, at::TensorList gate_up_weights,
                            at::TensorList gate_up_scales, at::TensorList down_weights, at::TensorList down_scales,
                            int64_t top_k, bool normalize_top_k, int64_t intermediate_size) {
  TORCH_CHECK(hidden.dim() == 2 && router_weight.dim() == 2 &&
                  router_weight.size(0) == static_cast<int64_t>(gate_up_weights.size()),
              "moe_rms_norm_swiglu: router [experts, hidden] and every expert's weights");
  const at::Tensor normalized = NormalizedRows(hidden, norm_weight, eps);
  // The router's logits in the activations' dtype (as Hugging Face's linear gives them), then float32 on the host.
  const at::Tensor logits = at::linear(normalized, router_weight).to(at::kFloat).to(at::kCPU).contiguous();
  const ExpertGroups groups = GroupByExpert(ChooseExperts(logits, top_k, normalize_top_k), router_weight.size(0));
  return Mixture(hidden, normalized, groups, gate_up_weights, gate_up_scales, down_weights, down_scales,
                 intermediate_size);
}

}  // namespace llmc::model::cpu::composite
