// CPU kernel of the mixture-of-experts operator. The rows are normalized once, routed (the router is small:
// one ATen matmul), grouped by expert; then each chosen expert runs two team jobs over only its rows: gate/up
// with SiLU(gate) * up into a staging of the expert's intermediate rows, and down, whose epilogue adds each
// row's result times its routing weight into a float32 accumulator. An expert's weights stream once for all of
// its rows; experts nobody chose are never touched.
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/moe_ops.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/panel_matmul.h"
#include "worker/model/cpu/thread_team.h"

namespace llmc::model::cpu {
namespace {

using Bf16 = c10::BFloat16;
using GatedActivationKernel = void (*)(const float*, const float*, float*, int64_t);

thread_local int64_t active_expert_count = 0;
thread_local ExpertChoices last_choices;
thread_local bool experts_in_one_job = true;

GatedActivationKernel SelectSiluMul() {
#ifdef LLMC_CPU_X86_KERNELS
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512Bf16) return &SiluMulAvx512;
  if (isa == CpuIsa::kAvx2) return &SiluMulAvx2;
#endif
  return &SiluMulPortable;
}

void CheckMoeArguments(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& router_weight,
                       at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
                       at::TensorList down_scales, int64_t top_k, int64_t intermediate_size) {
  TORCH_CHECK(hidden.dim() == 2, "moe_rms_norm_swiglu: hidden must be [tokens, hidden]");
  const int64_t experts = static_cast<int64_t>(gate_up_weights.size());
  TORCH_CHECK(experts > 0 && static_cast<int64_t>(gate_up_scales.size()) == experts &&
                  static_cast<int64_t>(down_weights.size()) == experts &&
                  static_cast<int64_t>(down_scales.size()) == experts,
              "moe_rms_norm_swiglu: every expert needs its gate_up and down weights and scales");
  if (IsPackedWeight(router_weight)) {
    TORCH_CHECK(
        router_weight.size(0) == PanelCount(experts) && PackedDepth(router_weight) == PaddedDepth(hidden.size(1)),
        "moe_rms_norm_swiglu: packed router weight does not match [experts, hidden]");
  } else {
    TORCH_CHECK(router_weight.dim() == 2 && router_weight.size(0) == experts && router_weight.size(1) == hidden.size(1),
                "moe_rms_norm_swiglu: router weight must be [experts, hidden] of the input's dtype");
  }
  TORCH_CHECK(router_weight.scalar_type() == hidden.scalar_type(),
              "moe_rms_norm_swiglu: router weight must be of the input's dtype");
  TORCH_CHECK(norm_weight.numel() == hidden.size(1) && norm_weight.scalar_type() == hidden.scalar_type(),
              "moe_rms_norm_swiglu: norm weight must be [hidden] of the input's dtype");
  TORCH_CHECK(top_k >= 1 && top_k <= experts, "moe_rms_norm_swiglu: top_k must be 1 .. experts, got ", top_k);
  TORCH_CHECK(intermediate_size > 0, "moe_rms_norm_swiglu: intermediate_size must be positive");
}

// What the experts' part of the operator works on: the chosen experts' rows (ExpertGroups' entries), their
// normalized inputs, and the per-entry buffers it fills (activated: SiLU(gate) * up; outputs: the expert's
// output times the entry's weight, both rounded to T as the reference rounds them, in float32).
template <typename T>
struct ExpertWork {
  const at::Tensor& hidden;
  at::TensorList gate_up_weights, gate_up_scales, down_weights, down_scales;
  const ExpertGroups& groups;
  const T* normalized;
  T* activated;
  float* outputs;
  int64_t intermediate;
};

template <typename T>
void CheckExpertWeights(const ExpertWork<T>& work, const PanelWeight& gate_up, const PanelWeight& down) {
  const int64_t k = work.hidden.size(1);
  CheckPacked("moe_rms_norm_swiglu", work.hidden, gate_up, 2 * work.intermediate);
  TORCH_CHECK(PackedDepth(down.packed) == PaddedDepth(work.intermediate) && down.packed.size(0) == PanelCount(k),
              "moe_rms_norm_swiglu: packed down weight does not match [hidden, intermediate_size]");
}

// The epilogues: gate/up's panel of 16 SiLU(gate) * up values per row; down's panel of 32 outputs per row, times
// the entry's weight.
template <typename T>
void StoreActivated(const ExpertWork<T>& work, GatedActivationKernel activate, int64_t first_entry, int64_t panel,
                    int64_t m0, int64_t rows, const float* c) {
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t first = panel * kHalf, columns = std::min(kHalf, work.intermediate - first);
  float values[kHalf];
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = c + r * kPanelWidth;
    activate(gate, gate + kHalf, values, columns);
    T* dst = work.activated + (first_entry + m0 + r) * work.intermediate + first;
    for (int64_t j = 0; j < columns; ++j) dst[j] = T(values[j]);
  }
}

template <typename T>
void StoreWeightedOutput(const ExpertWork<T>& work, int64_t first_entry, int64_t panel, int64_t m0, int64_t rows,
                         const float* c) {
  const int64_t k = work.hidden.size(1);
  const int64_t first = panel * kPanelWidth, columns = std::min(kPanelWidth, k - first);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t entry = first_entry + m0 + r;
    const float weight = static_cast<float>(T(work.groups.weights[entry]));
    float* dst = work.outputs + entry * k + first;
    for (int64_t j = 0; j < columns; ++j) dst[j] = weight * static_cast<float>(T(c[r * kPanelWidth + j]));
  }
}

// Two team jobs per chosen expert, each staging only that expert's rows: the general path (AMX tile stagings
// among others).
template <typename T>
void RunExpertsOneByOne(const ExpertWork<T>& work) {
  const int64_t k = work.hidden.size(1);
  const at::ScalarType dtype = work.hidden.scalar_type();
  const GatedActivationKernel activate = SelectSiluMul();
  const ExpertGroups& groups = work.groups;
  for (size_t expert = 0; expert + 1 < groups.offsets.size(); ++expert) {
    const int64_t first_entry = groups.offsets[expert], count = groups.offsets[expert + 1] - first_entry;
    if (count == 0) continue;
    const PanelWeight gate_up{work.gate_up_weights[expert], work.gate_up_scales[expert]};
    const PanelWeight down{work.down_weights[expert], work.down_scales[expert]};
    CheckExpertWeights(work, gate_up, down);
    const Staged gate_up_rows = PrepareStaging(count, k, gate_up, dtype);
    WorkQueue gate_up_queue(gate_up.packed.size(0), MaxTeamSize());
    InTeam([&](TeamMember& member) {
      StageRows<T>(member, gate_up_rows, k, [&](int64_t row, T* dst) {
        std::copy_n(work.normalized + groups.rows[first_entry + row] * k, k, dst);
      });
      MatmulPanels(member, gate_up_rows, gate_up, gate_up_queue,
                   [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
                     StoreActivated(work, activate, first_entry, panel, m0, rows, c);
                   });
    });
    const Staged down_rows = PrepareStaging(count, work.intermediate, down, dtype);
    WorkQueue down_queue(down.packed.size(0), MaxTeamSize());
    InTeam([&](TeamMember& member) {
      StageRows<T>(member, down_rows, work.intermediate, [&](int64_t row, T* dst) {
        std::copy_n(work.activated + (first_entry + row) * work.intermediate, work.intermediate, dst);
      });
      MatmulPanels(member, down_rows, down, down_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
        StoreWeightedOutput(work, first_entry, panel, m0, rows, c);
      });
    });
  }
}

// The panels of several experts' weights as one sequence of work items, expert after expert: a member claims
// runs of them and multiplies each by its expert's rows.
class ExpertPanels {
 public:
  void Clear() {
    multipliers_.clear();
    experts_.clear();
    first_entries_.clear();
    starts_.assign(1, 0);
  }
  void Add(int64_t expert, int64_t first_entry, const Staged& rows, const PanelWeight& weight) {
    multipliers_.emplace_back(rows, weight);
    experts_.push_back(expert);
    first_entries_.push_back(first_entry);
    starts_.push_back(starts_.back() + multipliers_.back().panels);
  }
  int64_t total() const { return starts_.back(); }
  // epilogue(first_entry, panel, m0, rows, c) for every panel the member claims.
  template <typename Epilogue>
  void Run(TeamMember& member, WorkQueue& queue, Epilogue&& epilogue) const {
    float* c = TeamMemberScratch();
    const int64_t run = std::max<int64_t>(1, total() / (16 * member.size()));
    for (auto [first, last] = queue.Claim(member, run); first < last;
         std::tie(first, last) = queue.Claim(member, run)) {
      size_t index = std::upper_bound(starts_.begin(), starts_.end(), first) - starts_.begin() - 1;
      for (int64_t item = first; item < last; ++item) {
        while (item >= starts_[index + 1]) ++index;
        const int64_t first_entry = first_entries_[index];
        multipliers_[index].Multiply(item - starts_[index], c,
                                     [&](int64_t panel, int64_t m0, int64_t rows, const float* block) {
                                       epilogue(first_entry, panel, m0, rows, block);
                                     });
      }
    }
  }

 private:
  std::vector<PanelMultiplier> multipliers_;
  std::vector<int64_t> experts_, first_entries_, starts_{0};
};

// Every chosen expert in one team job: all entries' rows staged at once, the gate/up panels of all chosen experts
// handed out as one queue, then (after a barrier) their intermediate rows staged and the down panels likewise: two
// stagings and one job for the layer instead of two jobs per expert. False (nothing done) for AMX tile stagings,
// whose tiles would read past one expert's rows.
template <typename T>
bool RunExpertsInOneJob(const ExpertWork<T>& work) {
  const int64_t k = work.hidden.size(1), entries = static_cast<int64_t>(work.groups.rows.size());
  const at::ScalarType dtype = work.hidden.scalar_type();
  const ExpertGroups& groups = work.groups;
  size_t first_active = 0;
  while (groups.offsets[first_active + 1] == groups.offsets[first_active]) ++first_active;
  const PanelWeight first_gate_up{work.gate_up_weights[first_active], work.gate_up_scales[first_active]};
  const PanelWeight first_down{work.down_weights[first_active], work.down_scales[first_active]};
  // Both stagings use the calling thread's staging buffers, one after the other: each is prepared twice, so that
  // the second round grows nothing and both keep valid pointers.
  Staged gate_up_rows = PrepareStaging(entries, k, first_gate_up, dtype);
  Staged down_rows = PrepareStaging(entries, work.intermediate, first_down, dtype);
  gate_up_rows = PrepareStaging(entries, k, first_gate_up, dtype);
  down_rows = PrepareStaging(entries, work.intermediate, first_down, dtype);
  if (gate_up_rows.amx_int8 || down_rows.amx_int8) return false;
  // The calling thread's (the team's members see their own thread-locals, not these: captured by reference).
  thread_local ExpertPanels gate_up_list, down_list;
  ExpertPanels& gate_up_panels = gate_up_list;
  ExpertPanels& down_panels = down_list;
  gate_up_panels.Clear();
  down_panels.Clear();
  for (size_t expert = 0; expert + 1 < groups.offsets.size(); ++expert) {
    const int64_t first_entry = groups.offsets[expert], count = groups.offsets[expert + 1] - first_entry;
    if (count == 0) continue;
    const PanelWeight gate_up{work.gate_up_weights[expert], work.gate_up_scales[expert]};
    const PanelWeight down{work.down_weights[expert], work.down_scales[expert]};
    CheckExpertWeights(work, gate_up, down);
    TORCH_CHECK(gate_up.packed.scalar_type() == first_gate_up.packed.scalar_type() &&
                    gate_up.scales.sizes() == first_gate_up.scales.sizes() &&
                    down.scales.sizes() == first_down.scales.sizes(),
                "moe_rms_norm_swiglu: every expert's weights must be of one kind");
    gate_up_panels.Add(static_cast<int64_t>(expert), first_entry, StagedRange(gate_up_rows, first_entry, count),
                       gate_up);
    down_panels.Add(static_cast<int64_t>(expert), first_entry, StagedRange(down_rows, first_entry, count), down);
  }
  const GatedActivationKernel activate = SelectSiluMul();
  WorkQueue gate_up_queue(gate_up_panels.total(), MaxTeamSize());
  WorkQueue down_queue(down_panels.total(), MaxTeamSize());
  InTeam([&](TeamMember& member) {
    StageRows<T>(member, gate_up_rows, k,
                 [&](int64_t entry, T* dst) { std::copy_n(work.normalized + groups.rows[entry] * k, k, dst); });
    gate_up_panels.Run(member, gate_up_queue,
                       [&](int64_t first_entry, int64_t panel, int64_t m0, int64_t rows, const float* c) {
                         StoreActivated(work, activate, first_entry, panel, m0, rows, c);
                       });
    member.Barrier();
    StageRows<T>(member, down_rows, work.intermediate, [&](int64_t entry, T* dst) {
      std::copy_n(work.activated + entry * work.intermediate, work.intermediate, dst);
    });
    down_panels.Run(member, down_queue,
                    [&](int64_t first_entry, int64_t panel, int64_t m0, int64_t rows, const float* c) {
                      StoreWeightedOutput(work, first_entry, panel, m0, rows, c);
                    });
  });
  return true;
}

template <typename T>
at::Tensor MoeImpl(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& router_weight,
                   at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
                   at::TensorList down_scales, int64_t top_k, bool normalize_top_k, int64_t intermediate) {
  const int64_t tokens = hidden.size(0), k = hidden.size(1);
  const int64_t experts = static_cast<int64_t>(gate_up_weights.size());
  const at::ScalarType dtype = hidden.scalar_type();
  // One job: each row RMS-normalized (kept for the experts) and staged for the router, whose logits are rounded to
  // the activations' dtype as Hugging Face's linear rounds them.
  const PanelWeight router{router_weight, at::Tensor()};
  CheckPacked("moe_rms_norm_swiglu", hidden, router, experts);
  T* normalized = reinterpret_cast<T*>(CallerBuffer(kMoeNormalizedRows, tokens * k * sizeof(T)));
  float* logits = reinterpret_cast<float*>(CallerBuffer(kMoeRouterLogits, tokens * experts * sizeof(float)));
  const Staged router_rows = PrepareStaging(tokens, k, router, dtype);
  WorkQueue router_queue(router.packed.size(0), MaxTeamSize());
  const T* x = hidden.data_ptr<T>();
  const T* norm = norm_weight.data_ptr<T>();
  const float epsilon = static_cast<float>(eps);
  InTeam([&](TeamMember& member) {
    StageRows<T>(member, router_rows, k, [&](int64_t row, T* dst) {
      const T* in = x + row * k;
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += static_cast<float>(in[j]) * static_cast<float>(in[j]);
      const float inverse_rms = 1.0f / std::sqrt(sum / static_cast<float>(k) + epsilon);
      for (int64_t j = 0; j < k; ++j) dst[j] = T(static_cast<float>(in[j]) * inverse_rms * static_cast<float>(norm[j]));
      std::copy_n(dst, k, normalized + row * k);
    });
    MatmulPanels(member, router_rows, router, router_queue,
                 [&](int64_t panel, int64_t m0, int64_t block_rows, const float* c) {
                   const int64_t first = panel * kPanelWidth, columns = std::min(kPanelWidth, experts - first);
                   for (int64_t r = 0; r < block_rows; ++r) {
                     for (int64_t j = 0; j < columns; ++j) {
                       logits[(m0 + r) * experts + first + j] = static_cast<float>(T(c[r * kPanelWidth + j]));
                     }
                   }
                 });
  });
  ExpertChoices& choices = last_choices;
  ChooseExperts(logits, tokens, experts, top_k, normalize_top_k, choices);
  thread_local ExpertGroups groups;
  GroupByExpert(choices, experts, groups);
  CountActiveExperts(groups.active_experts);

  // Each entry's (row, choice) output times its weight, in the order the experts hold them; then each row sums
  // its own in choice order (deterministic whatever member computed which entry).
  const int64_t entries = tokens * top_k;
  float* outputs = reinterpret_cast<float*>(CallerBuffer(kMoeEntryOutputs, entries * k * sizeof(float)));
  T* activated = reinterpret_cast<T*>(CallerBuffer(kMoeActivatedRows, entries * intermediate * sizeof(T)));
  const ExpertWork<T> work{hidden, gate_up_weights, gate_up_scales, down_weights, down_scales,
                           groups, normalized,      activated,      outputs,      intermediate};
  if (!experts_in_one_job || !RunExpertsInOneJob(work)) RunExpertsOneByOne(work);
  at::Tensor result = at::empty_like(hidden);
  T* out = result.data_ptr<T>();
  const int64_t* entry_of = groups.entry_of_choice.data();
  InTeam([&](TeamMember& member) {
    const auto [first, last] = member.Share(tokens);
    for (int64_t t = first; t < last; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        float sum = static_cast<float>(x[t * k + j]);
        for (int64_t i = 0; i < top_k; ++i) sum += outputs[entry_of[t * top_k + i] * k + j];
        out[t * k + j] = T(sum);
      }
    }
  });
  return result;
}

}  // namespace

at::Tensor NormalizedRows(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps) {
  const at::Tensor x = hidden.to(at::kFloat);
  return (x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * norm_weight.to(at::kFloat))
      .to(hidden.scalar_type())
      .contiguous();
}

at::Tensor RouterLogits(const at::Tensor& normalized_rows, const at::Tensor& router_weight) {
  return at::linear(normalized_rows, router_weight).to(at::kFloat).to(at::kCPU).contiguous();
}

void ChooseExperts(const float* router_logits, int64_t rows, int64_t num_experts, int64_t top_k, bool normalize_top_k,
                   ExpertChoices& choices) {
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
    const float largest = *std::max_element(l, l + num_experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < num_experts; ++e) sum += probabilities[e] = std::exp(l[e] - largest);
    for (int64_t e = 0; e < num_experts; ++e) probabilities[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    // Largest first, equal ones (NaN compares as equal) by the lower index.
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return probabilities[a] > probabilities[b] || (!(probabilities[b] > probabilities[a]) && a < b);
    });
    float chosen_sum = 0.0f;
    for (int64_t i = 0; i < top_k; ++i) chosen_sum += probabilities[order[i]];
    for (int64_t i = 0; i < top_k; ++i) {
      choices.experts[row * top_k + i] = order[i];
      choices.weights[row * top_k + i] =
          normalize_top_k ? probabilities[order[i]] / chosen_sum : probabilities[order[i]];
    }
  }
}

ExpertChoices ChooseExperts(const at::Tensor& router_logits, int64_t top_k, bool normalize_top_k) {
  TORCH_CHECK(router_logits.dim() == 2 && router_logits.scalar_type() == at::kFloat && router_logits.is_contiguous(),
              "router logits must be contiguous float32 [rows, experts]");
  ExpertChoices choices;
  ChooseExperts(router_logits.data_ptr<float>(), router_logits.size(0), router_logits.size(1), top_k, normalize_top_k,
                choices);
  return choices;
}

const ExpertChoices& LastExpertChoices() { return last_choices; }

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

at::Tensor MoeRmsNormSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                            const at::Tensor& router_weight, at::TensorList gate_up_weights,
                            at::TensorList gate_up_scales, at::TensorList down_weights, at::TensorList down_scales,
                            int64_t top_k, bool normalize_top_k, int64_t intermediate_size) {
  CheckMoeArguments(hidden, norm_weight, router_weight, gate_up_weights, gate_up_scales, down_weights, down_scales,
                    top_k, intermediate_size);
  const bool packed = IsPackedWeight(gate_up_weights[0]);
  TORCH_CHECK(IsPackedWeight(router_weight) == packed,
              "moe_rms_norm_swiglu: the router and the experts must all be packed or none");
  for (size_t e = 0; e < gate_up_weights.size(); ++e) {
    TORCH_CHECK(IsPackedWeight(gate_up_weights[e]) == packed && IsPackedWeight(down_weights[e]) == packed,
                "moe_rms_norm_swiglu: the experts' weights must all be packed or none");
  }
  if (!packed) {
    return composite::MoeRmsNormSwiglu(hidden, norm_weight, eps, router_weight, gate_up_weights, gate_up_scales,
                                       down_weights, down_scales, top_k, normalize_top_k, intermediate_size);
  }
  const at::Tensor x = hidden.contiguous(), norm = norm_weight.contiguous(), router = router_weight.contiguous();
  if (x.scalar_type() == at::kBFloat16) {
    return MoeImpl<Bf16>(x, norm, eps, router, gate_up_weights, gate_up_scales, down_weights, down_scales, top_k,
                         normalize_top_k, intermediate_size);
  }
  TORCH_CHECK(x.scalar_type() == at::kFloat, "moe_rms_norm_swiglu: bfloat16 or float32 activations only");
  return MoeImpl<float>(x, norm, eps, router, gate_up_weights, gate_up_scales, down_weights, down_scales, top_k,
                        normalize_top_k, intermediate_size);
}

void SetExpertsInOneJob(bool one_job) { experts_in_one_job = one_job; }

int64_t TakeActiveExpertCount() { return std::exchange(active_expert_count, 0); }
void CountActiveExperts(int64_t experts) { active_expert_count += experts; }

bool EnsureMoeOpsRegistered() { return true; }

}  // namespace llmc::model::cpu

TORCH_LIBRARY_FRAGMENT(llmc, m) {
  m.def(
      "moe_rms_norm_swiglu(Tensor hidden, Tensor norm_weight, float eps, Tensor router_weight, "
      "Tensor[] gate_up_weights, Tensor[] gate_up_scales, Tensor[] down_weights, Tensor[] down_scales, int top_k, "
      "bool normalize_top_k, int intermediate_size) -> Tensor");
}

TORCH_LIBRARY_IMPL(llmc, CPU, m) { m.impl("moe_rms_norm_swiglu", &llmc::model::cpu::MoeRmsNormSwiglu); }

TORCH_LIBRARY_IMPL(llmc, CUDA, m) { m.impl("moe_rms_norm_swiglu", &llmc::model::cpu::composite::MoeRmsNormSwiglu); }
