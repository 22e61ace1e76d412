#include "worker/model/loaded_model.h"

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/model/cpu/fused_ops.h"
#include "worker/model/cpu/packed_weight.h"
#include "worker/model/paged_attention_ops.h"

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

absl::Status ExpectShape(const torch::jit::Module& module, const std::string& path,
                         std::initializer_list<int64_t> expected) {
  at::Tensor tensor;
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) {
    if (parameter.name == path) tensor = parameter.value;
  }
  if (!tensor.defined()) return absl::InvalidArgumentError(absl::StrCat("model.pt has no parameter ", path));
  if (tensor.sizes() != at::IntArrayRef(expected)) {
    return absl::InvalidArgumentError(absl::StrCat("model.pt parameter ", path, " is ", Shape(tensor),
                                                   " but the manifest implies [", absl::StrJoin(expected, ", "), "]"));
  }
  return absl::OkStatus();
}

// The module must be the network the manifest describes; a mismatch would otherwise surface as wrong
// output or a crash in the middle of serving.
absl::Status CheckModuleAgainstManifest(const torch::jit::Module& module, const ModelManifest& m) {
  if (!module.find_method("forward")) return absl::InvalidArgumentError("model.pt has no forward method");
  if (!module.find_method("forward_top_k")) return absl::InvalidArgumentError("model.pt has no forward_top_k method");
  const int64_t kv_width = m.num_kv_heads * m.head_dim;
  RETURN_IF_ERROR(ExpectShape(module, "model.embed_tokens.weight", {m.vocab_size, m.hidden_size}));
  RETURN_IF_ERROR(ExpectShape(module, "lm_head.weight", {m.vocab_size, m.hidden_size}));
  const int64_t q_width = m.num_heads * m.head_dim;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    const std::string prefix = absl::StrCat("model.layers.", layer, ".");
    RETURN_IF_ERROR(ExpectShape(module, prefix + "self_attn.qkv_proj.weight", {q_width + 2 * kv_width, m.hidden_size}));
    RETURN_IF_ERROR(ExpectShape(module, prefix + "self_attn.o_proj.weight", {m.hidden_size, q_width}));
    RETURN_IF_ERROR(ExpectShape(module, prefix + "mlp.gate_up_proj.weight", {2 * m.intermediate_size, m.hidden_size}));
    RETURN_IF_ERROR(ExpectShape(module, prefix + "mlp.down_proj.weight", {m.hidden_size, m.intermediate_size}));
  }
  const std::string extra_layer = absl::StrCat("model.layers.", m.num_layers, ".self_attn.qkv_proj.weight");
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) {
    if (parameter.name == extra_layer) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.pt has more layers than the manifest's num_layers (", m.num_layers, ")"));
    }
  }
  return absl::OkStatus();
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Replaces every projection matrix by its packed layout (cpu/packed_weight.h), in place: the original storage
// is released, so resident memory does not grow. A tied embedding shares the packed LM head.
void PackWeightsForCpu(torch::jit::Module& module, const ModelManifest& m) {
  at::Tensor lm_head;
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) {
    at::Tensor value = parameter.value;
    if (cpu::IsPackedWeight(value) || value.dim() != 2) continue;
    if (EndsWith(parameter.name, "mlp.gate_up_proj.weight")) {
      value.set_data(cpu::PackWeight(value, cpu::GateUpColumnOrder(m.intermediate_size)));
    } else if (EndsWith(parameter.name, "qkv_proj.weight") || EndsWith(parameter.name, "o_proj.weight") ||
               EndsWith(parameter.name, "down_proj.weight") || parameter.name == "lm_head.weight") {
      value.set_data(cpu::PackWeight(value));
    }
    if (parameter.name == "lm_head.weight") lm_head = value;
  }
  if (!m.tie_word_embeddings || !lm_head.defined()) return;
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) {
    if (parameter.name == "model.embed_tokens.weight" && !cpu::IsPackedWeight(parameter.value)) {
      at::Tensor value = parameter.value;
      value.set_data(lm_head);
    }
  }
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
  try {
    module.eval();
    module.to(device);
    // Only the weights change dtype; buffers such as the rotary frequencies stay float32.
    if (dtype != package_dtype) {
      for (auto parameter : module.parameters(/*recurse=*/true)) parameter.set_data(parameter.to(dtype));
    }
    if (device.is_cpu() && options.pack_weights) PackWeightsForCpu(module, manifest);
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("cannot move the model to ", device.str(), ": ", error.what()));
  }
  return std::unique_ptr<LoadedModel>(new LoadedModel(std::move(manifest), std::move(module), device, dtype));
}

int64_t LoadedModel::KvCacheBlockBytes(int64_t block_size) const {
  return manifest_.num_layers * 2 * block_size * manifest_.num_kv_heads * manifest_.head_dim *
         static_cast<int64_t>(c10::elementSize(dtype_));
}

absl::StatusOr<at::Tensor> LoadedModel::AllocateKvCache(int64_t num_blocks, int64_t block_size) const {
  if (num_blocks <= 0 || block_size <= 0) return absl::InvalidArgumentError("KV cache needs blocks of tokens");
  try {
    return at::zeros({manifest_.num_layers, 2, num_blocks, block_size, manifest_.num_kv_heads, manifest_.head_dim},
                     at::TensorOptions().dtype(dtype_).device(device_));
  } catch (const std::exception& error) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a KV cache of ", num_blocks, " blocks (",
                                                     num_blocks * KvCacheBlockBytes(block_size),
                                                     " bytes): ", error.what()));
  }
}

void LoadedModel::ReserveStepBuffers(int64_t max_tokens, int64_t max_logits_rows, int64_t max_top_k) const {
  if (!device_.is_cpu()) return;
  const ModelManifest& m = manifest_;
  const int64_t max_depth = std::max({m.hidden_size, m.intermediate_size, m.num_heads * m.head_dim});
  cpu::ReserveCallerBuffers(max_tokens, max_depth, (m.num_heads + 2 * m.num_kv_heads) * m.head_dim, max_logits_rows,
                            max_top_k, dtype_);
}

std::vector<c10::IValue> LoadedModel::Inputs(const ForwardBatch& batch, at::Tensor& kv_cache) const {
  const auto on_device = [this](const at::Tensor& tensor) { return tensor.to(device_, /*non_blocking=*/true); };
  return {on_device(batch.input_ids),        on_device(batch.positions),     kv_cache,
          on_device(batch.slot_mapping),     on_device(batch.block_tables),  on_device(batch.seq_lens),
          on_device(batch.query_start_locs), on_device(batch.logits_indices)};
}

absl::StatusOr<at::Tensor> LoadedModel::Forward(const ForwardBatch& batch, at::Tensor& kv_cache) {
  try {
    c10::InferenceMode inference;
    return module_.forward(Inputs(batch, kv_cache)).toTensor();
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("model forward failed: ", ConciseError(error)));
  }
}

absl::StatusOr<SamplingLogits> LoadedModel::ForwardForSampling(const ForwardBatch& batch, at::Tensor& kv_cache,
                                                               const at::Tensor& full_rows, int64_t top_k) {
  try {
    c10::InferenceMode inference;
    std::vector<c10::IValue> inputs = Inputs(batch, kv_cache);
    inputs.emplace_back(full_rows.to(device_));
    inputs.emplace_back(top_k);
    const auto outputs = module_.get_method("forward_top_k")(std::move(inputs)).toTuple();
    return SamplingLogits{outputs->elements()[0].toTensor(), outputs->elements()[1].toTensor(),
                          outputs->elements()[2].toTensor()};
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("model forward failed: ", ConciseError(error)));
  }
}

}  // namespace llmc::model
