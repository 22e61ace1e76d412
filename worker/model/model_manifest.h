#ifndef LLMC_WORKER_MODEL_MODEL_MANIFEST_H_
#define LLMC_WORKER_MODEL_MODEL_MANIFEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace llmc::model {

inline constexpr char kManifestFile[] = "llmc-model.json";
// Version 3 packages call the fused operators (docs/model-package.md); version 4 adds forward_top_k, the
// step that returns top logits instead of full rows; version 5 passes every projection its weight_scale (int8
// weights); version 6 adds forward_with_hidden and embedding_pooling (embeddings; a version 5 package loads
// and serves no embeddings); version 7 passes rms_norm_qkv_rope the per-head q/k norm weights (Qwen3's QK-norm;
// the exporter writes 7 only for packages that use them); version 8 passes paged_attention a per-layer window
// (sliding-window layers; written only for packages with one). Older ones are refused with a hint to re-export.
inline constexpr int kMinManifestFormatVersion = 5;
inline constexpr int kManifestFormatVersion = 13;
// Version 9: int4 weights (quantization "int4", two 4-bit weights a byte); written only for int4 packages, so an
// older worker refuses them by their version. Version 10: Gemma 3's graph (linear_residual's output norm,
// rms_norm_gate_up_gelu_tanh, local rotations, soft-capped logits); written only for packages that use it.
inline constexpr int kInt4ManifestFormatVersion = 9;
// Version 11: int4 weights with zero points (scales [N, G, 2], cpu/int4_weight.h); written only for packages
// that have them.
inline constexpr int kInt4ZeroPointManifestFormatVersion = 11;
// Version 12: mixtures of experts (moe_rms_norm_swiglu and the manifest's moe fields); written only for packages
// with sparse layers.
inline constexpr int kMoeManifestFormatVersion = 12;
// MXFP4 experts (quantization "mxfp4": the experts' E2M1 codes with E8M0 exponents, cpu/mxfp4_weight.h).
inline constexpr int kMxfp4ManifestFormatVersion = 13;

// llmc-model.json (docs/model-package.md).
struct ModelManifest {
  std::string name;
  std::string architecture;
  std::string dtype;  // "float32" or "bfloat16": the activations, and the weights unless quantized
  // "none", or "int8": the projections (and the LM head with tied embeddings) are int8 with float32 scales,
  // one per output row (quantization_group_size 0) or per group of that many inputs.
  std::string quantization = "none";
  int64_t quantization_group_size = 0;
  int format_version = 0;
  // How an int8 package is served unless the worker is told (--quantization): "int8" (activations chosen by
  // the batch, also what packages without the field mean), or "w8a16" / "w8a8". The exporter writes "w8a16"
  // for a W8A16 checkpoint, which was quantized to run with 16-bit activations.
  std::string served_quantization = "int8";
  // How an embedding pools the final normalized hidden states of its tokens before L2 normalization: "last",
  // "mean", or "none" (no embeddings; also what packages without the field mean).
  std::string embedding_pooling = "none";
  std::string chat_template;       // a built-in template's name (chat_template.h)
  std::string chat_template_file;  // the model's own Jinja template, a file in the package; wins when set
  // Special tokens a Jinja template may name (bos_token, eos_token, ...), as the model's tokenizer_config.json
  // spells them.
  std::vector<std::pair<std::string, std::string>> special_tokens;
  // How the model writes tool calls: a typed_output::ToolCallFormat name (hermes, qwen3_coder, llama3_json,
  // pythonic, mistral, deepseek_v3, deepseek_v31, harmony), or "none" (also what packages without the field mean).
  std::string tool_call_format = "none";
  // The markers around the model's reasoning (<think> and </think>); both empty when it does not reason apart
  // (packages without the `reasoning` field).
  std::string reasoning_start;
  std::string reasoning_end;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_context_length = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  bool tie_word_embeddings = false;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
  // Mixtures of experts: the sparse layers (ascending), each routing a token to experts_per_token of its
  // num_experts SwiGLU experts of moe_intermediate_size, their probabilities renormalized when normalize_top_k.
  // Empty for a dense model.
  std::vector<int64_t> moe_layers;
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  bool normalize_top_k = false;
  // "softmax_topk" (Qwen3-MoE, Mixtral; also what a manifest without the field means) or "clamped_swiglu"
  // (GPT-OSS: biased router, top-k logits then softmax, biased experts with the clamped SwiGLU).
  std::string moe_variant = "softmax_topk";
  bool IsSparseLayer(int64_t layer) const;
};

// Reads and validates `<package_dir>/llmc-model.json`: NOT_FOUND when missing, FAILED_PRECONDITION for
// another format or version, INVALID_ARGUMENT naming the field for anything malformed.
absl::StatusOr<ModelManifest> ReadModelManifest(const std::string& package_dir);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_MODEL_MANIFEST_H_
