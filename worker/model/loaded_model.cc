#include "worker/model/loaded_model.h"

#ifdef __linux__
#include <malloc.h>
#endif

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/int4_requantize.h"
#include "worker/model/cpu/int4_weight.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/cpu/logit_masks.h"
#include "worker/model/cpu/mxfp4_weight.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/operator_graph_passes.h"
#include "worker/model/paged_attention_ops.h"
#include "worker/model/step_inputs.h"

namespace llmc::model {
namespace {

absl::StatusOr<at::ScalarType> ParseDtype(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  return absl::InvalidArgumentError(absl::StrCat("unsupported dtype '", name, "' (float32 or bfloat16)"));
}

absl::StatusOr<at::Device> ResolveDevice(const std::string& name) {
  const bool cuda_available = torch::cuda::is_available();
  if (name == "auto") return cuda_available ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  if (name == "cpu") return at::Device(at::kCPU);
  try {
    const at::Device device(name);
    if (device.is_cuda() && !cuda_available) {
      return absl::FailedPreconditionError(
          absl::StrCat("device '", name, "' asked for, but this libtorch has no CUDA or no GPU is visible"));
    }
    return device;
  } catch (const c10::Error&) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device '", name, "' (auto, cpu, cuda, cuda:N)"));
  }
}

// TorchScript wraps an operator's error in a traceback; the line worth reporting is the original error.
std::string ConciseError(const std::exception& error) {
  const std::string text = error.what();
  const size_t original = text.rfind("Error: ");
  const size_t start = original == std::string::npos ? 0 : original + 7;
  const size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string Shape(const at::Tensor& tensor) { return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "]"); }

using ParameterMap = std::map<std::string, at::Tensor>;

absl::Status ExpectShape(const ParameterMap& parameters, const std::string& path,
                         std::initializer_list<int64_t> expected) {
  const auto found = parameters.find(path);
  if (found == parameters.end()) return absl::InvalidArgumentError(absl::StrCat("model.pt has no parameter ", path));
  const at::Tensor& tensor = found->second;
  if (tensor.sizes() != at::IntArrayRef(expected)) {
    return absl::InvalidArgumentError(absl::StrCat("model.pt parameter ", path, " is ", Shape(tensor),
                                                   " but the manifest implies [", absl::StrJoin(expected, ", "), "]"));
  }
  return absl::OkStatus();
}

// A sparse layer's router [num_experts, hidden] and its experts' stacked gate/up and down projections.
absl::Status CheckExperts(const ParameterMap& parameters, const ModelManifest& m, const std::string& prefix,
                          int64_t per_byte) {
  RETURN_IF_ERROR(ExpectShape(parameters, prefix + "mlp.gate.weight", {m.num_experts, m.hidden_size}));
  for (int64_t expert = 0; expert < m.num_experts; ++expert) {
    const std::string name = absl::StrCat(prefix, "mlp.experts.", expert, ".");
    RETURN_IF_ERROR(
        ExpectShape(parameters, name + "gate_up_proj.weight", {2 * m.moe_intermediate_size, m.hidden_size / per_byte}));
    RETURN_IF_ERROR(
        ExpectShape(parameters, name + "down_proj.weight", {m.hidden_size, m.moe_intermediate_size / per_byte}));
  }
  if (parameters.count(absl::StrCat(prefix, "mlp.experts.", m.num_experts, ".down_proj.weight")) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.pt ", prefix, "mlp has more experts than the manifest's num_experts (", m.num_experts, ")"));
  }
  return absl::OkStatus();
}

// The module must be the network the manifest describes; a mismatch would otherwise surface as wrong
// output or a crash in the middle of serving.
absl::Status CheckModuleAgainstManifest(const torch::jit::Module& module, const ModelManifest& m) {
  if (!module.find_method("forward")) return absl::InvalidArgumentError("model.pt has no forward method");
  if (!module.find_method("forward_top_k")) return absl::InvalidArgumentError("model.pt has no forward_top_k method");
  if (m.embedding_pooling != "none" && !module.find_method("forward_with_hidden")) {
    return absl::InvalidArgumentError(
        "the manifest names an embedding_pooling but model.pt has no forward_with_hidden method; re-export it with "
        "tools/export_model.py");
  }
  ParameterMap parameters;
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) parameters[parameter.name] = parameter.value;
  const int64_t kv_width = m.num_kv_heads * m.head_dim;
  // int4 matrices hold two inputs a byte (MXFP4's: the experts only); a tied embedding is the LM head's.
  const int64_t per_byte = m.quantization == "int4" ? 2 : 1;
  const int64_t expert_per_byte = m.quantization == "mxfp4" ? 2 : per_byte;
  RETURN_IF_ERROR(ExpectShape(parameters, "model.embed_tokens.weight",
                              {m.vocab_size, m.tie_word_embeddings ? m.hidden_size / per_byte : m.hidden_size}));
  RETURN_IF_ERROR(ExpectShape(parameters, "lm_head.weight", {m.vocab_size, m.hidden_size / per_byte}));
  const int64_t q_width = m.num_heads * m.head_dim;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    const std::string prefix = absl::StrCat("model.layers.", layer, ".");
    RETURN_IF_ERROR(ExpectShape(parameters, prefix + "self_attn.qkv_proj.weight",
                                {q_width + 2 * kv_width, m.hidden_size / per_byte}));
    RETURN_IF_ERROR(ExpectShape(parameters, prefix + "self_attn.o_proj.weight", {m.hidden_size, q_width / per_byte}));
    if (m.IsSparseLayer(layer)) {
      RETURN_IF_ERROR(CheckExperts(parameters, m, prefix, expert_per_byte));
    } else {
      RETURN_IF_ERROR(ExpectShape(parameters, prefix + "mlp.gate_up_proj.weight",
                                  {2 * m.intermediate_size, m.hidden_size / per_byte}));
      RETURN_IF_ERROR(
          ExpectShape(parameters, prefix + "mlp.down_proj.weight", {m.hidden_size, m.intermediate_size / per_byte}));
    }
    // QK-norm: one weight per head dimension
    if (m.architecture == "qwen3" || m.architecture == "gemma3" || m.architecture == "qwen3_moe") {
      RETURN_IF_ERROR(ExpectShape(parameters, prefix + "self_attn.q_norm.weight", {m.head_dim}));
      RETURN_IF_ERROR(ExpectShape(parameters, prefix + "self_attn.k_norm.weight", {m.head_dim}));
    }
    if (m.architecture == "gemma3") {  // the MLP's input and output norms
      RETURN_IF_ERROR(ExpectShape(parameters, prefix + "pre_feedforward_layernorm.weight", {m.hidden_size}));
      RETURN_IF_ERROR(ExpectShape(parameters, prefix + "post_feedforward_layernorm.weight", {m.hidden_size}));
    }
  }
  if (parameters.count(absl::StrCat("model.layers.", m.num_layers, ".self_attn.qkv_proj.weight")) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.pt has more layers than the manifest's num_layers (", m.num_layers, ")"));
  }
  return absl::OkStatus();
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The matrices the fused operators stream, each with its "<name>_scale" buffer (empty unless int8).
bool IsProjection(const std::string& name) {
  return EndsWith(name, "qkv_proj.weight") || EndsWith(name, "o_proj.weight") ||
         EndsWith(name, "gate_up_proj.weight") || EndsWith(name, "down_proj.weight") || name == "lm_head.weight";
}

struct Projection {
  std::string name;
  at::Tensor weight;
  at::Tensor scale;
};

// The projections (lm_head last) and, separately, the embedding with its scale.
absl::StatusOr<std::vector<Projection>> FindProjections(const torch::jit::Module& module, Projection* embedding) {
  std::map<std::string, at::Tensor> scales;
  for (const auto& buffer : module.named_buffers(/*recurse=*/true)) {
    if (EndsWith(buffer.name, ".weight_scale")) scales[buffer.name] = buffer.value;
  }
  std::vector<Projection> projections;
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) {
    const bool is_embedding = parameter.name == "model.embed_tokens.weight";
    if (!IsProjection(parameter.name) && !is_embedding) continue;
    const auto scale = scales.find(parameter.name + "_scale");
    if (scale == scales.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model.pt has no buffer ", parameter.name, "_scale"));
    }
    Projection projection{parameter.name, parameter.value, scale->second};
    if (is_embedding) {
      *embedding = projection;
    } else {
      projections.push_back(projection);
    }
  }
  std::stable_partition(projections.begin(), projections.end(),
                        [](const Projection& p) { return p.name != "lm_head.weight"; });
  return projections;
}

// An int4 package holds uint8 [N, K / 2] projections (two weights a byte, cpu/int4_weight.h) with float32
// scales [N, K / group_size], or from format version 11 [N, K / group_size, 2] with zero points.
absl::Status CheckInt4(const std::vector<Projection>& projections, const ModelManifest& m) {
  for (const Projection& p : projections) {
    if (p.weight.scalar_type() != at::kByte) {
      return absl::InvalidArgumentError(absl::StrCat("model.pt ", p.name, " is ", c10::toString(p.weight.scalar_type()),
                                                     " but the manifest says quantization 'int4' (uint8 pairs)"));
    }
    const int64_t k = 2 * p.weight.size(1), group_size = m.quantization_group_size;
    if (!cpu::IsSupportedInt4GroupSize(group_size) || k % group_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat("quantization_group_size ", group_size, " does not fit ", p.name,
                                                     " (", k, " inputs; int4 takes 32, 64 or 128 dividing them)"));
    }
    const bool zero_points = cpu::HasInt4ZeroPoints(p.scale);
    if ((p.scale.dim() != 2 && !zero_points) || p.scale.size(0) != p.weight.size(0) ||
        p.scale.size(1) != k / group_size || p.scale.scalar_type() != at::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.pt ", p.name, "_scale is ", Shape(p.scale), " but an int4 weight of ", k,
                       " inputs with group size ", group_size, " needs float32 [", p.weight.size(0), ", ",
                       k / group_size, "] (or [", p.weight.size(0), ", ", k / group_size, ", 2] with zero points)"));
    }
    if (!zero_points) continue;
    if (m.format_version < kInt4ZeroPointManifestFormatVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.pt ", p.name, " has int4 zero points, which need format_version ",
                       kInt4ZeroPointManifestFormatVersion, " or later, not ", m.format_version));
    }
    const at::Tensor zeros = p.scale.select(2, 1);
    if (!(zeros == zeros.round()).all().item<bool>() || !(zeros >= 0).all().item<bool>() ||
        !(zeros <= 16).all().item<bool>()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.pt ", p.name, "_scale holds zero points that are not integers from 0 to 16"));
    }
  }
  return absl::OkStatus();
}

// An MXFP4 package's experts hold uint8 codes [N, K / 2] with uint8 exponents [N, K / 32] (cpu/mxfp4_weight.h);
// its other projections, weights of its dtype and empty scales.
absl::Status CheckMxfp4(const std::vector<Projection>& projections) {
  for (const Projection& p : projections) {
    if (p.name.find(".mlp.experts.") == std::string::npos) {
      if (p.weight.scalar_type() == at::kByte || p.weight.scalar_type() == at::kChar || p.scale.numel() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.pt ", p.name, " is quantized, but an MXFP4 package keeps only its experts in 4 bits"));
      }
      continue;
    }
    const int64_t k = 2 * p.weight.size(1);
    if (p.weight.scalar_type() != at::kByte || p.scale.scalar_type() != at::kByte || p.scale.dim() != 2 ||
        p.scale.size(0) != p.weight.size(0) || k % cpu::kMxfp4GroupSize != 0 ||
        p.scale.size(1) != k / cpu::kMxfp4GroupSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.pt ", p.name, " is ", c10::toString(p.weight.scalar_type()), " ", Shape(p.weight),
                       " with ", c10::toString(p.scale.scalar_type()), " scales ", Shape(p.scale),
                       ", but an MXFP4 expert of ", k, " inputs needs uint8 codes [", p.weight.size(0), ", ", k / 2,
                       "] and uint8 exponents [", p.weight.size(0), ", ", k / cpu::kMxfp4GroupSize, "]"));
    }
    if ((p.scale == 255).any().item<bool>()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.pt ", p.name, "_scale holds the exponent 255, which MXFP4 defines as NaN"));
    }
  }
  return absl::OkStatus();
}

// An int8 package holds int8 projections with float32 scales [N, G]; any other, weights of its dtype and
// empty scales.
absl::Status CheckQuantization(const std::vector<Projection>& projections, const ModelManifest& m) {
  if (m.quantization == "int4") return CheckInt4(projections, m);
  if (m.quantization == "mxfp4") return CheckMxfp4(projections);
  const bool int8 = m.quantization == "int8";
  for (const Projection& p : projections) {
    const bool weight_int8 = p.weight.scalar_type() == at::kChar;
    if (weight_int8 != int8) {
      return absl::InvalidArgumentError(absl::StrCat("model.pt ", p.name, " is ", c10::toString(p.weight.scalar_type()),
                                                     " but the manifest says quantization '", m.quantization, "'"));
    }
    if (!int8) {
      if (p.scale.numel() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.pt ", p.name, "_scale is set but the weight is not int8"));
      }
      continue;
    }
    const int64_t k = p.weight.size(1);
    if (!cpu::IsSupportedInt8GroupSize(m.quantization_group_size) ||
        (m.quantization_group_size > 0 && k % m.quantization_group_size != 0)) {
      return absl::InvalidArgumentError(absl::StrCat("quantization_group_size ", m.quantization_group_size,
                                                     " does not fit ", p.name, " (", k,
                                                     " inputs; 0, or 32, 64, 128, 256, 512 dividing them)"));
    }
    const int64_t groups = m.quantization_group_size == 0 ? 1 : k / m.quantization_group_size;
    if (p.scale.dim() != 2 || p.scale.size(0) != p.weight.size(0) || p.scale.size(1) != groups ||
        p.scale.scalar_type() != at::kFloat) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.pt ", p.name, "_scale is ", Shape(p.scale), " but an int8 weight ", Shape(p.weight),
          " with group size ", m.quantization_group_size, " needs float32 [", p.weight.size(0), ", ", groups, "]"));
    }
  }
  return absl::OkStatus();
}

// FastChat's --load-8bit: every projection (and, when tied, the embedding with the LM head) becomes int8 with
// its scales, replacing the original storage.
// int4: the same with QuantizeInt4.
void QuantizeProjections(std::vector<Projection>& projections, Projection& embedding, const ModelManifest& m,
                         int64_t group_size, bool int4) {
  for (Projection& p : projections) {
    // int4's quantizer runs on the CPU; its results go back to the weight's device.
    auto [quantized, scales] =
        int4 ? cpu::QuantizeInt4(p.weight.cpu(), group_size) : cpu::QuantizeInt8(p.weight, group_size);
    quantized = quantized.to(p.weight.device());
    scales = scales.to(p.weight.device());
    p.weight.set_requires_grad(false);  // an integer tensor cannot take part in autograd
    p.weight.set_data(quantized);
    p.scale.set_data(scales);
    if (p.name == "lm_head.weight" && m.tie_word_embeddings && embedding.weight.defined()) {
      if (embedding.weight.is_floating_point()) {
        embedding.weight.set_requires_grad(false);
        embedding.weight.set_data(p.weight);
      }
      if (embedding.scale.numel() == 0) embedding.scale.set_data(p.scale);
    }
  }
}

// Gives the free pages of the heap back to the system. The loaded weights live in malloc's heap; once one is
// replaced, its pages are free but stay resident until trimmed, and the packed copies go to a separate
// arena rather than reusing them.
void ReleaseFreedHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// Replaces every projection matrix (and int8 scales) by its packed layout (cpu/packed_weight.h), in place:
// the original storage is released, so resident memory does not grow. A tied embedding shares the packed LM
// head.
void PackWeightsForCpu(std::vector<Projection>& projections, Projection& embedding, const ModelManifest& m,
                       bool huge_pages) {
  // A dense MLP's or an expert's [gate; up] (rows: twice its width).
  const auto column_order = [&](const Projection& p) {
    return EndsWith(p.name, "gate_up_proj.weight") ? cpu::GateUpColumnOrder(p.weight.size(0) / 2)
                                                   : std::vector<int64_t>{};
  };
  const auto packs = [](const Projection& p) { return !cpu::IsPackedWeight(p.weight) && p.weight.dim() == 2; };
  size_t packed_bytes = 0;
  for (const Projection& p : projections) {
    if (!packs(p)) continue;
    const int64_t bytes = p.weight.scalar_type() == at::kByte ? cpu::PackedInt4WeightBytes(p.weight, column_order(p))
                                                              : cpu::PackedWeightBytes(p.weight, column_order(p));
    packed_bytes += cpu::HugePageArena::TensorBytes(static_cast<size_t>(bytes));
  }
  // All packed weights in one huge-page arena: a decode step streams through every byte of them.
  const std::shared_ptr<cpu::HugePageArena> arena =
      huge_pages && packed_bytes > 0 ? cpu::HugePageArena::Create(packed_bytes) : nullptr;
  for (Projection& p : projections) {
    if (!packs(p)) continue;
    const std::vector<int64_t> order = column_order(p);
    const bool quantized = p.weight.scalar_type() == at::kChar || p.weight.scalar_type() == at::kByte;
    if (quantized) {
      p.scale.set_data(cpu::IsMxfp4Scales(p.scale)           ? cpu::PackMxfp4Scales(p.scale, order)
                       : p.weight.scalar_type() == at::kByte ? cpu::PackInt4Scales(p.scale, order)
                                                             : cpu::PackScales(p.scale, order));
    }
    p.weight.set_data(p.weight.scalar_type() == at::kByte ? cpu::PackInt4Weight(p.weight, order, arena.get())
                                                          : cpu::PackWeight(p.weight, order, arena.get()));
    // Decided here rather than in the first large batch, which would scan every scale of the weight.
    if (p.weight.scalar_type() == at::kByte && p.scale.scalar_type() == at::kFloat &&
        cpu::RequantizesLargeInt4Batches()) {
      cpu::Int4RequantizesToInt8(cpu::PanelWeight(p.weight, p.scale));
    }
    // The original went back to the heap; trimmed now, loading peaks at one projection above the weights.
    ReleaseFreedHeap();
    if (p.name != "lm_head.weight" || !m.tie_word_embeddings || !embedding.weight.defined()) continue;
    if (!cpu::IsPackedWeight(embedding.weight)) embedding.weight.set_data(p.weight);
    if (quantized && (embedding.scale.dim() < 3 || cpu::HasInt4ZeroPoints(embedding.scale))) {
      embedding.scale.set_data(p.scale);
    }
  }
}

// A sparse layer's expert lists (the exporter's SparseMoe: what the network hands the MoE operator, held so that
// the interpreter does not gather them at every step), by name. Packages of format 12 gather them per call and
// have none.
constexpr const char* kExpertLists[] = {"gate_up_weights", "gate_up_scales", "gate_up_biases",
                                        "down_weights",    "down_scales",    "down_biases"};

std::vector<torch::jit::Module> ModulesWithExpertLists(const torch::jit::Module& module) {
  std::vector<torch::jit::Module> found;
  for (const auto& child : module.named_modules()) {
    if (child.value.hasattr("experts") && child.value.hasattr(kExpertLists[0])) found.push_back(child.value);
  }
  return found;
}

// Emptied while the weights are converted and repacked: the lists would keep every original tensor alive.
void ClearExpertLists(const std::vector<torch::jit::Module>& sparse_layers) {
  for (torch::jit::Module layer : sparse_layers) {
    for (const char* name : kExpertLists) {
      if (layer.hasattr(name)) layer.setattr(name, c10::List<at::Tensor>());
    }
  }
}

// Made again from the experts' tensors as they are served.
void RefreshExpertLists(const std::vector<torch::jit::Module>& sparse_layers) {
  for (torch::jit::Module layer : sparse_layers) {
    c10::List<at::Tensor> lists[std::size(kExpertLists)];
    for (const torch::jit::Module& expert : layer.attr("experts").toModule().children()) {
      int index = 0;
      for (const char* projection : {"gate_up_proj", "down_proj"}) {
        const torch::jit::Module linear = expert.attr(projection).toModule();
        lists[index++].push_back(linear.attr("weight").toTensor());
        lists[index++].push_back(linear.attr("weight_scale").toTensor());
        const c10::IValue bias = linear.attr("bias");
        if (bias.isTensor()) lists[index].push_back(bias.toTensor());
        ++index;
      }
    }
    // kExpertLists' order: gate_up's weights, scales, biases, then down's.
    for (size_t i = 0; i < std::size(kExpertLists); ++i) {
      if (layer.hasattr(kExpertLists[i])) layer.setattr(kExpertLists[i], lists[i]);
    }
  }
}

// A sparse layer's router ([experts, hidden], in the activations' dtype, never quantized: routing is where a
// rounding would change which experts run) packed for the CPU kernels as the projections are.
void PackRoutersForCpu(const torch::jit::Module& module) {
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) {
    if (!EndsWith(parameter.name, ".mlp.gate.weight") || cpu::IsPackedWeight(parameter.value)) continue;
    at::Tensor weight = parameter.value;
    weight.set_data(cpu::PackWeight(weight));
  }
}

// The module frozen (its weights and settings become constants of its graphs, its submodules' methods inlined),
// every method it has kept.
torch::jit::Module FrozenWithEveryMethod(const torch::jit::Module& module) {
  std::vector<std::string> methods;
  for (const torch::jit::Method& method : module.get_methods()) methods.push_back(method.name());
  return torch::jit::freeze(module, methods, /*optimize_numerics=*/false);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::Load(const std::string& package_dir,
                                                               const LoadOptions& options) {
  EnsurePagedAttentionOpsRegistered();
  cpu::EnsureFusedOpsRegistered();
  ASSIGN_OR_RETURN(ModelManifest manifest, ReadModelManifest(package_dir));
  ASSIGN_OR_RETURN(const at::ScalarType package_dtype, ParseDtype(manifest.dtype));
  ASSIGN_OR_RETURN(const at::ScalarType dtype, options.dtype.empty() ? package_dtype : ParseDtype(options.dtype));
  ASSIGN_OR_RETURN(const at::Device device, ResolveDevice(options.device));
  const std::string model_path = absl::StrCat(package_dir, "/model.pt");
  if (!std::filesystem::exists(model_path)) {
    return absl::NotFoundError(absl::StrCat("model package has no model.pt: ", model_path));
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(model_path, at::Device(at::kCPU));
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load ", model_path, " (corrupt or not TorchScript): ", ConciseError(error)));
  }
  RETURN_IF_ERROR(Annotate(CheckModuleAgainstManifest(module, manifest), package_dir));
  const std::vector<torch::jit::Module> sparse_layers = ModulesWithExpertLists(module);
  ClearExpertLists(sparse_layers);
  Projection embedding;
  absl::StatusOr<std::vector<Projection>> found = FindProjections(module, &embedding);
  if (!found.ok()) return Annotate(found.status(), package_dir);
  std::vector<Projection> projections = *std::move(found);
  RETURN_IF_ERROR(Annotate(CheckQuantization(projections, manifest), package_dir));
  std::string quantization = options.quantization;
  if (quantization.empty()) {
    // An int8 package may ask for fixed activations (a W8A16 checkpoint's); only the CPU kernels fix them, so
    // elsewhere it is served as int8.
    const bool kernels_fix_activations = device.is_cpu() && options.pack_weights;
    quantization = manifest.quantization == "int8" && kernels_fix_activations ? manifest.served_quantization
                                                                              : manifest.quantization;
  }
  if (quantization != "none" && quantization != "int8" && quantization != "w8a16" && quantization != "w8a8" &&
      quantization != "int4" && quantization != "w4a16" && quantization != "w4a8" && quantization != "mxfp4") {
    return absl::InvalidArgumentError(absl::StrCat("unknown quantization '", quantization,
                                                   "' (none, int8, w8a16, w8a8, int4, w4a16, w4a8 or mxfp4)"));
  }
  // MXFP4 experts are served as they are: the package's other weights in its dtype.
  if ((manifest.quantization == "mxfp4") != (quantization == "mxfp4")) {
    return absl::InvalidArgumentError(
        manifest.quantization == "mxfp4"
            ? absl::StrCat(package_dir, " holds MXFP4 experts; serve it with quantization mxfp4 (or unset), not ",
                           quantization)
            : absl::StrCat("quantization mxfp4 needs a package exported with MXFP4 experts (--quantize mxfp4); ",
                           package_dir, " holds ",
                           manifest.quantization == "none" ? "unquantized" : manifest.quantization, " weights"));
  }
  // int4 weights: from an int4 package, or quantized at load from a bfloat16/float32 one (the group size defaults
  // to 128). The CPU kernels run W4A8 where the CPU has the byte kernel (AVX512-VNNI) and W4A16 elsewhere; w4a16
  // and w4a8 fix the activations.
  const std::string int4_activations = quantization == "w4a16" || quantization == "w4a8" ? quantization : "";
  if (quantization == "w4a8" && !cpu::HasByteActivationKernel()) {
    return absl::InvalidArgumentError(absl::StrCat("quantization w4a8 needs AVX512-VNNI (this CPU path is ",
                                                   cpu::CpuIsaName(cpu::ActiveCpuIsa()), "); use int4 or w4a16"));
  }
  if (!int4_activations.empty()) quantization = "int4";
  const bool int4 = quantization == "int4";
  if (manifest.quantization == "int4" && !int4) {
    return absl::InvalidArgumentError(absl::StrCat(package_dir,
                                                   " holds int4 weights; serve it with quantization int4 "
                                                   "(not ",
                                                   quantization, "), or export the package without --quantize int4"));
  }
  if (int4 && manifest.quantization == "int8") {
    return absl::InvalidArgumentError(
        absl::StrCat(package_dir, " holds int8 weights: int4 at load quantizes a bfloat16 or float32 package only"));
  }
  // On CUDA, int4 is W4A16 (int4_linear_cuda.h).
  if (int4_activations == "w4a8" && !device.is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantization w4a8 (int8 activations) runs on the CPU kernels only, not on ", device.str(), "; use int4"));
  }
  const int64_t int4_group_size = options.quantization_group_size == 0 ? 128 : options.quantization_group_size;
  if (int4 && manifest.quantization == "none" && !cpu::IsSupportedInt4GroupSize(int4_group_size)) {
    return absl::InvalidArgumentError(absl::StrCat("int4 group size ", options.quantization_group_size,
                                                   " is not supported (32, 64 or 128; 0 for 128)"));
  }
  if (quantization == "none" && manifest.quantization == "int8") {
    return absl::InvalidArgumentError(absl::StrCat(
        package_dir, " holds int8 weights; serve it with quantization int8, or export the package without --quantize"));
  }
  // w8a16 and w8a8 fix the activations' precision for every batch, which only the CPU kernels do.
  const bool fixed_activations = quantization == "w8a16" || quantization == "w8a8";
  if (fixed_activations && (!device.is_cpu() || !options.pack_weights)) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantization ", quantization, " (", quantization == "w8a8" ? "int8" : "int16",
                     " activations) runs on the CPU kernels only, not on ", device.str(),
                     options.pack_weights ? "" : " without packed weights", "; use int8"));
  }
  const bool quantize_at_load = quantization != "none" && manifest.quantization == "none";
  if (quantize_at_load && !int4 && !cpu::IsSupportedInt8GroupSize(options.quantization_group_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("int8 group size ", options.quantization_group_size,
                     " is not supported (0 for one scale per row, or 32, 64, 128, 256, 512)"));
  }
  try {
    module.eval();
    module.to(device);
    // Only the floating weights change dtype; int8 weights, their scales and buffers such as the rotary
    // frequencies stay as they are.
    if (dtype != package_dtype) {
      for (auto parameter : module.parameters(/*recurse=*/true)) {
        if (parameter.is_floating_point()) parameter.set_data(parameter.to(dtype));
      }
    }
    if (quantize_at_load) {
      const int64_t group_size = int4 ? int4_group_size : options.quantization_group_size;
      QuantizeProjections(projections, embedding, manifest, group_size, int4);
      manifest.quantization = int4 ? "int4" : "int8";
      manifest.quantization_group_size = group_size;
    }
    if (device.is_cpu() && options.pack_weights) {
      PackWeightsForCpu(projections, embedding, manifest, options.huge_pages);
      if (!manifest.moe_layers.empty()) PackRoutersForCpu(module);
    }
    RefreshExpertLists(sparse_layers);
    if (device.is_cpu() && options.pack_weights && options.freeze_graphs) {
      module = FrozenWithEveryMethod(module);
      DropAttentionOutputReshapes(module, manifest.num_heads * manifest.head_dim);
    }
    // Served as: int8 (the CPU kernels choose int16 or int8 activations by the batch), w8a16 or w8a8; int4, w4a16
    // or w4a8.
    if (fixed_activations) manifest.quantization = quantization;
    if (!int4_activations.empty()) manifest.quantization = int4_activations;
    projections.clear();
    embedding = {};
    // Repacking and quantizing freed the original weights piece by piece: the rest of that heap goes back.
    ReleaseFreedHeap();
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("cannot prepare the model on ", device.str(), ": ", ConciseError(error)));
  }
  return std::unique_ptr<LoadedModel>(new LoadedModel(std::move(manifest), std::move(module), device, dtype,
                                                      options.huge_pages, device.is_cpu() && options.pack_weights));
}

int64_t LoadedModel::StepGraphNodes(const std::string& kind) const {
  return CountNodes(*module_.get_method("forward_top_k").graph(), c10::Symbol::fromQualString(kind));
}

int64_t LoadedModel::KvCacheBlockBytes(int64_t block_size) const {
  return manifest_.num_layers * 2 * block_size * manifest_.num_kv_heads * manifest_.head_dim *
         static_cast<int64_t>(c10::elementSize(dtype_));
}

absl::StatusOr<at::Tensor> LoadedModel::AllocateKvCache(int64_t num_blocks, int64_t block_size) const {
  if (num_blocks <= 0 || block_size <= 0) return absl::InvalidArgumentError("KV cache needs blocks of tokens");
  try {
    const std::vector<int64_t> sizes = {manifest_.num_layers, 2, num_blocks, block_size, manifest_.num_kv_heads,
                                        manifest_.head_dim};
    // On the CPU attention streams through the cache like the weights: huge pages for it too. A fresh
    // mapping reads as zeros already; writing them makes the whole cache resident now, as at::zeros does,
    // rather than page by page under the first requests.
    if (device_.is_cpu() && huge_pages_) return cpu::EmptyOnHugePages(sizes, dtype_).zero_();
    return at::zeros(sizes, at::TensorOptions().dtype(dtype_).device(device_));
  } catch (const std::exception& error) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a KV cache of ", num_blocks, " blocks (",
                                                     num_blocks * KvCacheBlockBytes(block_size),
                                                     " bytes): ", error.what()));
  }
}

void LoadedModel::ReserveStepBuffers(int64_t max_tokens, int64_t max_logits_rows, int64_t max_top_k) const {
  if (!device_.is_cpu()) return;
  const cpu::ScopedInt8Activations activations(int8_activations_);
  const ModelManifest& m = manifest_;
  const int64_t max_depth =
      std::max({m.hidden_size, m.intermediate_size, m.moe_intermediate_size, m.num_heads * m.head_dim});
  cpu::ReserveCallerBuffers(max_tokens, max_depth, (m.num_heads + 2 * m.num_kv_heads) * m.head_dim, max_logits_rows,
                            max_top_k, dtype_);
}

std::vector<c10::IValue> LoadedModel::Inputs(const ForwardBatch& batch, at::Tensor& kv_cache,
                                             const std::vector<at::Tensor>& extra) const {
  std::vector<at::Tensor> parts = {batch.input_ids, batch.positions,        batch.slot_mapping,  batch.block_tables,
                                   batch.seq_lens,  batch.query_start_locs, batch.logits_indices};
  parts.insert(parts.end(), extra.begin(), extra.end());
  // On a GPU: one asynchronous copy from page-locked memory for the whole step (step_inputs.h).
  if (!device_.is_cpu()) {
    for (at::Tensor& part : parts) part = part.contiguous();
    parts = ToDeviceInOneCopy(parts, device_, /*pinned=*/device_.is_cuda());
  }
  std::vector<c10::IValue> inputs(parts.begin(), parts.end());
  inputs.insert(inputs.begin() + 2, kv_cache);  // forward(input_ids, positions, kv_cache, slot_mapping, ...)
  return inputs;
}

absl::StatusOr<at::Tensor> LoadedModel::Forward(const ForwardBatch& batch, at::Tensor& kv_cache) {
  try {
    c10::InferenceMode inference;
    const cpu::ScopedInt8Activations activations(int8_activations_);
    return module_.forward(Inputs(batch, kv_cache)).toTensor();
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("model forward failed: ", ConciseError(error)));
  }
}

absl::StatusOr<SamplingLogits> LoadedModel::ForwardForSampling(const ForwardBatch& batch, at::Tensor& kv_cache,
                                                               const at::Tensor& full_rows, int64_t top_k,
                                                               const std::vector<const uint64_t*>* row_masks) {
  try {
    c10::InferenceMode inference;
    const cpu::ScopedInt8Activations activations(int8_activations_);
    const cpu::ScopedLogitMasks masks(masks_logits_in_pass_ ? row_masks : nullptr);
    const bool with_hidden = batch.hidden_rows.defined() && batch.hidden_rows.numel() > 0;
    if (with_hidden && !serves_embeddings()) {
      return absl::FailedPreconditionError("this model package serves no embeddings");
    }
    std::vector<at::Tensor> extra = {full_rows};
    if (with_hidden) extra.push_back(batch.hidden_rows);
    std::vector<c10::IValue> inputs = Inputs(batch, kv_cache, extra);
    // forward_top_k(batch..., full_rows, top_k[, hidden_rows]): top_k right after full_rows.
    const size_t after_full_rows = inputs.size() - extra.size() + 1;
    inputs.insert(inputs.begin() + after_full_rows, c10::IValue(top_k));
    const auto outputs =
        module_.get_method(with_hidden ? "forward_with_hidden" : "forward_top_k")(std::move(inputs)).toTuple();
    SamplingLogits logits{outputs->elements()[0].toTensor(), outputs->elements()[1].toTensor(),
                          outputs->elements()[2].toTensor(), at::Tensor()};
    if (with_hidden) logits.hidden = outputs->elements()[3].toTensor();
    return logits;
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("model forward failed: ", ConciseError(error)));
  }
}

}  // namespace llmc::model
