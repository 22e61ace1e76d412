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
  if (isa >= CpuIsa::kAvx2) return &SiluMulAvx2;
#endif
  return &SiluMulPortable;
}

void CheckMoeArguments(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& router_weight,
                       at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
                       at::TensorList down_scales, const MoeVariant& variant) {
  TORCH_CHECK(hidden.dim() == 2, "moe: hidden must be [tokens, hidden]");
  const int64_t experts = static_cast<int64_t>(gate_up_weights.size()), k = hidden.size(1);
  TORCH_CHECK(experts > 0 && static_cast<int64_t>(gate_up_scales.size()) == experts &&
                  static_cast<int64_t>(down_weights.size()) == experts &&
                  static_cast<int64_t>(down_scales.size()) == experts,
              "moe: every expert needs its gate_up and down weights and scales");
  if (IsPackedWeight(router_weight)) {
    TORCH_CHECK(router_weight.size(0) == PanelCount(experts) && PackedDepth(router_weight) == PaddedDepth(k),
                "moe: packed router weight does not match [experts, hidden]");
  } else {
    TORCH_CHECK(router_weight.dim() == 2 && router_weight.size(0) == experts && router_weight.size(1) == k,
                "moe: router weight must be [experts, hidden] of the input's dtype");
  }
  TORCH_CHECK(router_weight.scalar_type() == hidden.scalar_type(), "moe: router weight must be of the input's dtype");
  TORCH_CHECK(norm_weight.numel() == k && norm_weight.scalar_type() == hidden.scalar_type(),
              "moe: norm weight must be [hidden] of the input's dtype");
  TORCH_CHECK(variant.top_k >= 1 && variant.top_k <= experts, "moe: top_k must be 1 .. experts, got ", variant.top_k);
  TORCH_CHECK(variant.intermediate_size > 0, "moe: intermediate_size must be positive");
  const auto is_vector = [&](const at::Tensor& t, int64_t size) {
    return t.dim() == 1 && t.size(0) == size && t.scalar_type() == hidden.scalar_type() && t.is_contiguous();
  };
  TORCH_CHECK(!variant.router_bias.defined() || is_vector(variant.router_bias, experts),
              "moe: router bias must be [experts] of the input's dtype");
  for (const auto& [biases, size] :
       {std::pair{variant.gate_up_biases, 2 * variant.intermediate_size}, std::pair{variant.down_biases, k}}) {
    TORCH_CHECK(biases.empty() || static_cast<int64_t>(biases.size()) == experts,
                "moe: expert biases must be given for every expert or none");
    for (const at::Tensor& bias : biases) {
      TORCH_CHECK(is_vector(bias, size), "moe: an expert bias must be a contiguous [", size, "] of the input's dtype");
    }
  }
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
  const MoeVariant& variant;
  const T* Bias(at::TensorList biases, int64_t expert) const {
    return biases.empty() ? nullptr : biases[expert].data_ptr<T>();
  }
};

template <typename T>
void CheckExpertWeights(const ExpertWork<T>& work, const PanelWeight& gate_up, const PanelWeight& down) {
  const int64_t k = work.hidden.size(1);
  CheckPacked("moe_rms_norm_swiglu", work.hidden, gate_up, 2 * work.intermediate);
  TORCH_CHECK(PackedDepth(down.packed) == PaddedDepth(work.intermediate) && down.packed.size(0) == PanelCount(k),
              "moe_rms_norm_swiglu: packed down weight does not match [hidden, intermediate_size]");
}

// The epilogues: gate/up's panel of 16 activated values per row (SiLU(gate) * up, or GPT-OSS's clamped SwiGLU, the
// biases added first); down's panel of 32 outputs per row (plus its bias), times the entry's weight.
template <typename T>
void StoreActivated(const ExpertWork<T>& work, GatedActivationKernel activate, int64_t expert, int64_t first_entry,
                    int64_t panel, int64_t m0, int64_t rows, const float* c) {
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t first = panel * kHalf, columns = std::min(kHalf, work.intermediate - first);
  const T* bias = work.Bias(work.variant.gate_up_biases, expert);
  const float limit = work.variant.limit, alpha = work.variant.alpha;
  float gate[kHalf], up[kHalf], values[kHalf];
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = c + r * kPanelWidth;
    T* dst = work.activated + (first_entry + m0 + r) * work.intermediate + first;
    if (bias == nullptr && !work.variant.clamped_swiglu) {  // Qwen3-MoE, Mixtral: the panel's halves as they are
      activate(row, row + kHalf, values, columns);
      for (int64_t j = 0; j < columns; ++j) dst[j] = T(values[j]);
      continue;
    }
    for (int64_t j = 0; j < columns; ++j) {
      gate[j] = row[j] + (bias != nullptr ? static_cast<float>(bias[first + j]) : 0.0f);
      up[j] = row[kHalf + j] + (bias != nullptr ? static_cast<float>(bias[work.intermediate + first + j]) : 0.0f);
    }
    if (work.variant.clamped_swiglu) {
      for (int64_t j = 0; j < columns; ++j) {
        const float g = std::min(gate[j], limit), u = std::min(std::max(up[j], -limit), limit);
        values[j] = (u + 1.0f) * g / (1.0f + std::exp(-alpha * g));
      }
    } else {
      activate(gate, up, values, columns);
    }
    for (int64_t j = 0; j < columns; ++j) dst[j] = T(values[j]);
  }
}

template <typename T>
void StoreWeightedOutput(const ExpertWork<T>& work, int64_t expert, int64_t first_entry, int64_t panel, int64_t m0,
                         int64_t rows, const float* c) {
  const int64_t k = work.hidden.size(1);
  const int64_t first = panel * kPanelWidth, columns = std::min(kPanelWidth, k - first);
  const T* bias = work.Bias(work.variant.down_biases, expert);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t entry = first_entry + m0 + r;
    const float weight = static_cast<float>(T(work.groups.weights[entry]));
    float* dst = work.outputs + entry * k + first;
    for (int64_t j = 0; j < columns; ++j) {
      const float out = c[r * kPanelWidth + j] + (bias != nullptr ? static_cast<float>(bias[first + j]) : 0.0f);
      dst[j] = weight * static_cast<float>(T(out));
    }
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
    const Staged gate_up_rows = PrepareStaging(count, k, gate_up, dtype, LargeInt4Batches::kDequantized);
    WorkQueue gate_up_queue(gate_up.packed.size(0), MaxTeamSize());
    InTeam([&](TeamMember& member) {
      StageRows<T>(member, gate_up_rows, k, [&](int64_t row, T* dst) {
        std::copy_n(work.normalized + groups.rows[first_entry + row] * k, k, dst);
      });
      MatmulPanels(member, gate_up_rows, gate_up, gate_up_queue,
                   [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
                     StoreActivated(work, activate, static_cast<int64_t>(expert), first_entry, panel, m0, rows, c);
                   });
    });
    const Staged down_rows = PrepareStaging(count, work.intermediate, down, dtype, LargeInt4Batches::kDequantized);
    WorkQueue down_queue(down.packed.size(0), MaxTeamSize());
    InTeam([&](TeamMember& member) {
      StageRows<T>(member, down_rows, work.intermediate, [&](int64_t row, T* dst) {
        std::copy_n(work.activated + (first_entry + row) * work.intermediate, work.intermediate, dst);
      });
      MatmulPanels(member, down_rows, down, down_queue, [&](int64_t panel, int64_t m0, int64_t rows, const float* c) {
        StoreWeightedOutput(work, static_cast<int64_t>(expert), first_entry, panel, m0, rows, c);
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
  // epilogue(expert, first_entry, panel, m0, rows, c) for every panel the member claims.
  template <typename Epilogue>
  void Run(TeamMember& member, WorkQueue& queue, Epilogue&& epilogue) const {
    float* c = TeamMemberScratch();
    const int64_t run = std::max<int64_t>(1, total() / (16 * member.size()));
    for (auto [first, last] = queue.Claim(member, run); first < last;
         std::tie(first, last) = queue.Claim(member, run)) {
      size_t index = std::upper_bound(starts_.begin(), starts_.end(), first) - starts_.begin() - 1;
      for (int64_t item = first; item < last; ++item) {
        while (item >= starts_[index + 1]) ++index;
        const int64_t expert = experts_[index], first_entry = first_entries_[index];
        multipliers_[index].Multiply(item - starts_[index], c,
                                     [&](int64_t panel, int64_t m0, int64_t rows, const float* block) {
                                       epilogue(expert, first_entry, panel, m0, rows, block);
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
  Staged gate_up_rows = PrepareStaging(entries, k, first_gate_up, dtype, LargeInt4Batches::kDequantized);
  Staged down_rows = PrepareStaging(entries, work.intermediate, first_down, dtype, LargeInt4Batches::kDequantized);
  gate_up_rows = PrepareStaging(entries, k, first_gate_up, dtype, LargeInt4Batches::kDequantized);
  down_rows = PrepareStaging(entries, work.intermediate, first_down, dtype, LargeInt4Batches::kDequantized);
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
    gate_up_panels.Run(
        member, gate_up_queue,
        [&](int64_t expert, int64_t first_entry, int64_t panel, int64_t m0, int64_t rows, const float* c) {
          StoreActivated(work, activate, expert, first_entry, panel, m0, rows, c);
        });
    member.Barrier();
    StageRows<T>(member, down_rows, work.intermediate, [&](int64_t entry, T* dst) {
      std::copy_n(work.activated + entry * work.intermediate, work.intermediate, dst);
    });
    down_panels.Run(member, down_queue,
                    [&](int64_t expert, int64_t first_entry, int64_t panel, int64_t m0, int64_t rows, const float* c) {
                      StoreWeightedOutput(work, expert, first_entry, panel, m0, rows, c);
                    });
  });
  return true;
}

template <typename T>
at::Tensor MoeImpl(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& router_weight,
                   at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
                   at::TensorList down_scales, const MoeVariant& variant) {
  const int64_t top_k = variant.top_k, intermediate = variant.intermediate_size;
  const T* router_bias = variant.router_bias.defined() ? variant.router_bias.data_ptr<T>() : nullptr;
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
      NormRow(x + row * k, norm, epsilon, k, dst);
      std::copy_n(dst, k, normalized + row * k);
    });
    MatmulPanels(member, router_rows, router, router_queue,
                 [&](int64_t panel, int64_t m0, int64_t block_rows, const float* c) {
                   const int64_t first = panel * kPanelWidth, columns = std::min(kPanelWidth, experts - first);
                   for (int64_t r = 0; r < block_rows; ++r) {
                     for (int64_t j = 0; j < columns; ++j) {
                       const float bias = router_bias != nullptr ? static_cast<float>(router_bias[first + j]) : 0.0f;
                       logits[(m0 + r) * experts + first + j] = static_cast<float>(T(c[r * kPanelWidth + j] + bias));
                     }
                   }
                 });
  });
  ExpertChoices& choices = last_choices;
  ChooseExperts(logits, tokens, experts, top_k, variant.normalize_top_k, choices, variant.softmax_after_top_k);
  thread_local ExpertGroups groups;
  GroupByExpert(choices, experts, groups);
  CountActiveExperts(groups.active_experts);

  // Each entry's (row, choice) output times its weight, in the order the experts hold them; then each row sums
  // its own in choice order (deterministic whatever member computed which entry).
  const int64_t entries = tokens * top_k;
  float* outputs = reinterpret_cast<float*>(CallerBuffer(kMoeEntryOutputs, entries * k * sizeof(float)));
  T* activated = reinterpret_cast<T*>(CallerBuffer(kMoeActivatedRows, entries * intermediate * sizeof(T)));
  const ExpertWork<T> work{hidden,     gate_up_weights, gate_up_scales, down_weights, down_scales, groups,
                           normalized, activated,       outputs,        intermediate, variant};
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

// The checks of both schemas, then the kernel (or, for unpacked weights, the composite).
at::Tensor RunMoe(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps, const at::Tensor& router_weight,
                  at::TensorList gate_up_weights, at::TensorList gate_up_scales, at::TensorList down_weights,
                  at::TensorList down_scales, const MoeVariant& variant) {
  CheckMoeArguments(hidden, norm_weight, router_weight, gate_up_weights, gate_up_scales, down_weights, down_scales,
                    variant);
  const bool packed = IsPackedWeight(gate_up_weights[0]);
  TORCH_CHECK(IsPackedWeight(router_weight) == packed, "moe: the router and the experts must all be packed or none");
  for (size_t e = 0; e < gate_up_weights.size(); ++e) {
    TORCH_CHECK(IsPackedWeight(gate_up_weights[e]) == packed && IsPackedWeight(down_weights[e]) == packed,
                "moe: the experts' weights must all be packed or none");
  }
  if (!packed) {
    return composite::Moe(hidden, norm_weight, eps, router_weight, gate_up_weights, gate_up_scales, down_weights,
                          down_scales, variant);
  }
  const at::Tensor x = hidden.contiguous(), norm = norm_weight.contiguous(), router = router_weight.contiguous();
  if (x.scalar_type() == at::kBFloat16) {
    return MoeImpl<Bf16>(x, norm, eps, router, gate_up_weights, gate_up_scales, down_weights, down_scales, variant);
  }
  TORCH_CHECK(x.scalar_type() == at::kFloat, "moe: bfloat16 or float32 activations only");
  return MoeImpl<float>(x, norm, eps, router, gate_up_weights, gate_up_scales, down_weights, down_scales, variant);
}

}  // namespace

MoeVariant SoftmaxTopKVariant(int64_t top_k, bool normalize_top_k, int64_t intermediate_size) {
  MoeVariant variant;
  variant.top_k = top_k;
  variant.normalize_top_k = normalize_top_k;
  variant.intermediate_size = intermediate_size;
  return variant;
}

MoeVariant ClampedSwigluVariant(const at::Tensor& router_bias, at::TensorList gate_up_biases,
                                at::TensorList down_biases, int64_t top_k, int64_t intermediate_size, double alpha,
                                double limit) {
  MoeVariant variant;
  variant.top_k = top_k;
  variant.intermediate_size = intermediate_size;
  variant.softmax_after_top_k = true;
  variant.router_bias = router_bias.contiguous();
  variant.gate_up_biases = gate_up_biases;
  variant.down_biases = down_biases;
  variant.clamped_swiglu = true;
  variant.alpha = static_cast<float>(alpha);
  variant.limit = static_cast<float>(limit);
  return variant;
}

at::Tensor MoeRmsNormSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                            const at::Tensor& router_weight, at::TensorList gate_up_weights,
                            at::TensorList gate_up_scales, at::TensorList down_weights, at::TensorList down_scales,
                            int64_t top_k, bool normalize_top_k, int64_t intermediate_size) {
  return RunMoe(hidden, norm_weight, eps, router_weight, gate_up_weights, gate_up_scales, down_weights, down_scales,
                SoftmaxTopKVariant(top_k, normalize_top_k, intermediate_size));
}

at::Tensor MoeRmsNormClampedSwiglu(const at::Tensor& hidden, const at::Tensor& norm_weight, double eps,
                                   const at::Tensor& router_weight, const at::Tensor& router_bias,
                                   at::TensorList gate_up_weights, at::TensorList gate_up_scales,
                                   at::TensorList gate_up_biases, at::TensorList down_weights,
                                   at::TensorList down_scales, at::TensorList down_biases, int64_t top_k,
                                   int64_t intermediate_size, double alpha, double limit) {
  return RunMoe(hidden, norm_weight, eps, router_weight, gate_up_weights, gate_up_scales, down_weights, down_scales,
                ClampedSwigluVariant(router_bias, gate_up_biases, down_biases, top_k, intermediate_size, alpha, limit));
}

void SetExpertsInOneJob(bool one_job) { experts_in_one_job = one_job; }

const ExpertChoices& LastExpertChoices() { return last_choices; }

int64_t TakeActiveExpertCount() { return std::exchange(active_expert_count, 0); }
void CountActiveExperts(int64_t experts) { active_expert_count += experts; }

bool EnsureMoeOpsRegistered() { return true; }

}  // namespace llmc::model::cpu

TORCH_LIBRARY_FRAGMENT(llmc, m) {
  m.def(
      "moe_rms_norm_swiglu(Tensor hidden, Tensor norm_weight, float eps, Tensor router_weight, "
      "Tensor[] gate_up_weights, Tensor[] gate_up_scales, Tensor[] down_weights, Tensor[] down_scales, int top_k, "
      "bool normalize_top_k, int intermediate_size) -> Tensor");
  m.def(
      "moe_rms_norm_clamped_swiglu(Tensor hidden, Tensor norm_weight, float eps, Tensor router_weight, "
      "Tensor router_bias, Tensor[] gate_up_weights, Tensor[] gate_up_scales, Tensor[] gate_up_biases, "
      "Tensor[] down_weights, Tensor[] down_scales, Tensor[] down_biases, int top_k, int intermediate_size, "
      "float alpha, float limit) -> Tensor");
}

TORCH_LIBRARY_IMPL(llmc, CPU, m) {
  m.impl("moe_rms_norm_swiglu", &llmc::model::cpu::MoeRmsNormSwiglu);
  m.impl("moe_rms_norm_clamped_swiglu", &llmc::model::cpu::MoeRmsNormClampedSwiglu);
}

TORCH_LIBRARY_IMPL(llmc, CUDA, m) {
  m.impl("moe_rms_norm_swiglu", &llmc::model::cpu::composite::MoeRmsNormSwiglu);
  m.impl("moe_rms_norm_clamped_swiglu", &llmc::model::cpu::composite::MoeRmsNormClampedSwiglu);
}
