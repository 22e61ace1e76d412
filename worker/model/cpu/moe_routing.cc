// How a mixture of experts routes (moe_ops.h): each row's chosen experts and weights from the router's logits, and
// the (row, choice) entries grouped by expert for the kernels.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "worker/model/cpu/moe_ops.h"

namespace llmc::model::cpu {

void ChooseExperts(const float* router_logits, int64_t rows, int64_t num_experts, int64_t top_k, bool normalize_top_k,
                   ExpertChoices& choices, bool softmax_after_top_k) {
  TORCH_CHECK(top_k >= 1 && top_k <= num_experts, "top_k must be 1 .. experts");
  choices.rows = rows;
  choices.top_k = top_k;
  choices.experts.resize(rows * top_k);
  choices.weights.resize(rows * top_k);
  thread_local std::vector<float> probabilities;
  thread_local std::vector<int32_t> order;
  probabilities.resize(num_experts);
  order.resize(num_experts);
  for (int64_t row = 0; row < rows; ++row) {
    const float* l = router_logits + row * num_experts;
    if (softmax_after_top_k) {
      // The logits' order is the probabilities' order: choose by the logits, then softmax the chosen ones.
      std::copy_n(l, num_experts, probabilities.begin());
    } else {
      const float largest = *std::max_element(l, l + num_experts);
      float sum = 0.0f;
      for (int64_t e = 0; e < num_experts; ++e) sum += probabilities[e] = std::exp(l[e] - largest);
      for (int64_t e = 0; e < num_experts; ++e) probabilities[e] /= sum;
    }
    std::iota(order.begin(), order.end(), 0);
    // Largest first, equal ones (NaN compares as equal) by the lower index.
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return probabilities[a] > probabilities[b] || (!(probabilities[b] > probabilities[a]) && a < b);
    });
    if (softmax_after_top_k) {
      const float largest = probabilities[order[0]];
      for (int64_t i = 0; i < top_k; ++i) probabilities[order[i]] = std::exp(probabilities[order[i]] - largest);
      normalize_top_k = true;
    }
    float chosen_sum = 0.0f;
    for (int64_t i = 0; i < top_k; ++i) chosen_sum += probabilities[order[i]];
    for (int64_t i = 0; i < top_k; ++i) {
      choices.experts[row * top_k + i] = order[i];
      choices.weights[row * top_k + i] =
          normalize_top_k ? probabilities[order[i]] / chosen_sum : probabilities[order[i]];
    }
  }
}

ExpertChoices ChooseExperts(const at::Tensor& router_logits, int64_t top_k, bool normalize_top_k,
                            bool softmax_after_top_k) {
  TORCH_CHECK(router_logits.dim() == 2 && router_logits.scalar_type() == at::kFloat && router_logits.is_contiguous(),
              "router logits must be contiguous float32 [rows, experts]");
  ExpertChoices choices;
  ChooseExperts(router_logits.data_ptr<float>(), router_logits.size(0), router_logits.size(1), top_k, normalize_top_k,
                choices, softmax_after_top_k);
  return choices;
}

void GroupByExpert(const ExpertChoices& choices, int64_t num_experts, ExpertGroups& groups) {
  groups.offsets.assign(num_experts + 1, 0);
  groups.active_experts = 0;
  for (const int32_t expert : choices.experts) ++groups.offsets[expert + 1];
  for (int64_t e = 0; e < num_experts; ++e) {
    if (groups.offsets[e + 1] > 0) ++groups.active_experts;
    groups.offsets[e + 1] += groups.offsets[e];
  }
  groups.rows.resize(choices.experts.size());
  groups.weights.resize(choices.experts.size());
  groups.entry_of_choice.resize(choices.experts.size());
  thread_local std::vector<int64_t> next;
  next.assign(groups.offsets.begin(), groups.offsets.end() - 1);
  for (int64_t row = 0; row < choices.rows; ++row) {  // rows ascending within each expert
    for (int64_t i = 0; i < choices.top_k; ++i) {
      const int64_t slot = next[choices.experts[row * choices.top_k + i]]++;
      groups.entry_of_choice[row * choices.top_k + i] = slot;
      groups.rows[slot] = row;
      groups.weights[slot] = choices.weights[row * choices.top_k + i];
    }
  }
}

ExpertGroups GroupByExpert(const ExpertChoices& choices, int64_t num_experts) {
  ExpertGroups groups;
  GroupByExpert(choices, num_experts, groups);
  return groups;
}

}  // namespace llmc::model::cpu
