// The mixture-of-experts operator as an ATen composition: CUDA, unpacked weights, and the reference the CPU
// kernel is tested against. Routing is the kernel's (ChooseExperts on the router's float32 logits, copied to the
// host), so both choose the same experts; each chosen expert then runs on its gathered rows.
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/moe_ops.h"

namespace llmc::model::cpu::composite {
namespace {

at::Tensor Mixture(const at::Tensor& hidden, const at::Tensor& normalized, const ExpertGroups& groups,
                   at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
                   at::TensorList down_scales, const MoeVariant& variant) {
  const int64_t intermediate_size = variant.intermediate_size;
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
    const auto bias = [&](at::TensorList biases) {
      return biases.empty() ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(biases[expert]);
    };
    const at::Tensor gate_up =
        at::linear(normalized.index_select(0, rows), Dequantize(gate_up_weights[expert], gate_up_scales[expert], dtype),
                   bias(variant.gate_up_biases));
    at::Tensor gate = gate_up.narrow(1, 0, intermediate_size);
    at::Tensor up = gate_up.narrow(1, intermediate_size, intermediate_size);
    at::Tensor activated;
    if (variant.clamped_swiglu) {  // GPT-OSS
      gate = gate.clamp_max(variant.limit);
      up = up.clamp(-variant.limit, variant.limit);
      activated = (up + 1) * (gate * at::sigmoid(gate * variant.alpha));
    } else {
      activated = at::silu(gate) * up;
    }
    const at::Tensor out =
        at::linear(activated, Dequantize(down_weights[expert], down_scales[expert], dtype), bias(variant.down_biases));
    mixed.index_add_(0, rows, out * weights.unsqueeze(1));
  }
  return hidden + mixed;
}

}  // namespace

at::Tensor MoeWithChoices(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                          const ExpertChoices& choices, at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                          at::TensorList down_weights, at::TensorList down_scales, const MoeVariant& variant) {
  TORCH_CHECK(choices.rows == hidden.size(0), "moe: one routing choice per row");
  return Mixture(hidden, RmsNorm(hidden, norm_weight, eps),
                 GroupByExpert(choices, static_cast<int64_t>(gate_up_weights.size())), gate_up_weights, gate_up_scales,
                 down_weights, down_scales, variant);
}

at::Tensor Moe(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& router_weight,
               at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
               at::TensorList down_scales, const MoeVariant& variant) {
  TORCH_CHECK(hidden.dim() == 2 && router_weight.dim() == 2 &&
                  router_weight.size(0) == static_cast<int64_t>(gate_up_weights.size()),
              "moe: router [experts, hidden] and every expert's weights");
  const at::Tensor normalized = RmsNorm(hidden, norm_weight, eps);
  // The router's logits in the activations' dtype (as Hugging Face's linear gives them), then float32 on the host.
  const c10::optional<at::Tensor> router_bias =
      variant.router_bias.defined() ? c10::optional<at::Tensor>(variant.router_bias) : c10::nullopt;
  const at::Tensor logits = at::linear(normalized, router_weight, router_bias).to(at::kFloat).to(at::kCPU).contiguous();
  const ExpertGroups groups =
      GroupByExpert(ChooseExperts(logits, variant.top_k, variant.normalize_top_k, variant.softmax_after_top_k),
                    router_weight.size(0));
  return Mixture(hidden, normalized, groups, gate_up_weights, gate_up_scales, down_weights, down_scales, variant);
}

at::Tensor MoeRmsNormClampedSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                   const at::Tensor& router_weight, const at::Tensor& router_bias,
                                   at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                                   at::TensorList gate_up_biases, at::TensorList down_weights,
                                   at::TensorList down_scales, at::TensorList down_biases, int64_t top_k,
                                   int64_t intermediate_size, double alpha, double limit) {
  return Moe(hidden, norm_weight, eps, router_weight, gate_up_weights, gate_up_scales, down_weights, down_scales,
             ClampedSwigluVariant(router_bias, gate_up_biases, down_biases, top_k, intermediate_size, alpha, limit));
}

at::Tensor MoeRmsNormSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                            const at::Tensor& router_weight, at::TensorList gate_up_weights,
                            at::TensorList gate_up_scales, at::TensorList down_weights, at::TensorList down_scales,
                            int64_t top_k, bool normalize_top_k, int64_t intermediate_size) {
  return Moe(hidden, norm_weight, eps, router_weight, gate_up_weights, gate_up_scales, down_weights, down_scales,
             SoftmaxTopKVariant(top_k, normalize_top_k, intermediate_size));
}

}  // namespace llmc::model::cpu::composite
