#include "worker/model/model_manifest.h"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/typed_output/output_format.h"

namespace llmc::model {
namespace {

using nlohmann::json;

absl::Status Missing(const std::string& path, const char* field, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": '", field, "' must be ", what));
}

absl::Status ReadPositive(const json& root, const std::string& path, const char* field, int64_t* out) {
  const auto it = root.find(field);
  if (it == root.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
    return Missing(path, field, "a positive integer");
  }
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadString(const json& root, const std::string& path, const char* field, std::string* out) {
  const auto it = root.find(field);
  if (it == root.end() || !it->is_string() || it->get<std::string>().empty()) {
    return Missing(path, field, "a non-empty string");
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

// An optional string field that must be one of `choices` (named in the error as `listed`); where the field
// is absent, *out keeps its default.
absl::Status ReadChoice(const json& root, const std::string& path, const char* field,
                        std::initializer_list<std::string_view> choices, const char* listed, std::string* out) {
  if (root.contains(field)) {
    RETURN_IF_ERROR(ReadString(root, path, field, out));
  }
  if (std::find(choices.begin(), choices.end(), *out) == choices.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", field, " '", *out, "' is not supported by this llmc (", listed, ")"));
  }
  return absl::OkStatus();
}

// tool_call_format (a typed_output::ToolCallFormat name) and reasoning ({"start": ..., "end": ...}, both
// non-empty; absent or null: none). Absent fields keep the defaults: no tool calls, no reasoning.
absl::Status ReadOutputFormats(const json& root, const std::string& path, ModelManifest& manifest) {
  if (root.contains("tool_call_format")) {
    RETURN_IF_ERROR(ReadString(root, path, "tool_call_format", &manifest.tool_call_format));
    const absl::StatusOr<typed_output::ToolCallFormat> format =
        typed_output::ParseToolCallFormat(manifest.tool_call_format);
    if (!format.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tool_call_format: ", format.status().message()));
    }
  }
  const auto reasoning = root.find("reasoning");
  if (reasoning == root.end() || reasoning->is_null()) return absl::OkStatus();
  if (!reasoning->is_object()) {
    return Missing(path, "reasoning", "an object with the reasoning markers, {\"start\": ..., \"end\": ...}");
  }
  for (auto [key, target] : {std::pair{"start", &manifest.reasoning_start}, {"end", &manifest.reasoning_end}}) {
    const auto it = reasoning->find(key);
    if (it == reasoning->end() || !it->is_string() || it->get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": 'reasoning.", key, "' must be a non-empty string"));
    }
    *target = it->get<std::string>();
  }
  return absl::OkStatus();
}

// moe_layers, num_experts, experts_per_token, moe_intermediate_size and normalize_top_k, all or none (format
// version 12 on).
absl::Status ReadMixtureOfExperts(const json& root, const std::string& path, ModelManifest& manifest) {
  if (!root.contains("moe_layers")) return absl::OkStatus();
  if (manifest.format_version < kMoeManifestFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": mixtures of experts need format_version ",
                                                   kMoeManifestFormatVersion, " or later, not ",
                                                   manifest.format_version));
  }
  const json& layers = root["moe_layers"];
  if (!layers.is_array() || layers.empty()) return Missing(path, "moe_layers", "a non-empty list of layer indices");
  for (const json& layer : layers) {
    if (!layer.is_number_integer() || layer.get<int64_t>() < 0 || layer.get<int64_t>() >= manifest.num_layers ||
        (!manifest.moe_layers.empty() && layer.get<int64_t>() <= manifest.moe_layers.back())) {
      return Missing(path, "moe_layers", "ascending layer indices below num_layers");
    }
    manifest.moe_layers.push_back(layer.get<int64_t>());
  }
  RETURN_IF_ERROR(ReadPositive(root, path, "num_experts", &manifest.num_experts));
  RETURN_IF_ERROR(ReadPositive(root, path, "experts_per_token", &manifest.experts_per_token));
  RETURN_IF_ERROR(ReadPositive(root, path, "moe_intermediate_size", &manifest.moe_intermediate_size));
  if (manifest.experts_per_token > manifest.num_experts) {
    return Missing(path, "experts_per_token", "at most num_experts");
  }
  const auto normalize = root.find("normalize_top_k");
  if (normalize == root.end() || !normalize->is_boolean()) return Missing(path, "normalize_top_k", "true or false");
  manifest.normalize_top_k = normalize->get<bool>();
  return ReadChoice(root, path, "moe_variant", {"softmax_topk", "clamped_swiglu"}, "softmax_topk or clamped_swiglu",
                    &manifest.moe_variant);
}

}  // namespace

bool ModelManifest::IsSparseLayer(int64_t layer) const {
  return std::binary_search(moe_layers.begin(), moe_layers.end(), layer);
}

absl::StatusOr<ModelManifest> ReadModelManifest(const std::string& package_dir) {
  const std::string path = absl::StrCat(package_dir, "/", kManifestFile);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("model package has no manifest: ", path));
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", error.what()));
  }
  if (!root.is_object() || root.value("format", "") != "llmc-model") {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not an llmc model manifest"));
  }
  const int version = root.value("format_version", 0);
  if (version < kMinManifestFormatVersion || version > kManifestFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": package format version ", version, " is not supported (this llmc reads versions ",
        kMinManifestFormatVersion, " to ", kManifestFormatVersion, "); re-export it with tools/export_model.py"));
  }
  ModelManifest manifest;
  absl::Status status = ReadString(root, path, "name", &manifest.name);
  if (status.ok()) status = ReadString(root, path, "architecture", &manifest.architecture);
  if (status.ok()) status = ReadString(root, path, "dtype", &manifest.dtype);
  if (status.ok()) status = ReadString(root, path, "chat_template", &manifest.chat_template);
  if (status.ok() && root.contains("chat_template_file")) {
    status = ReadString(root, path, "chat_template_file", &manifest.chat_template_file);
  }
  if (status.ok() && root.contains("special_tokens")) {
    const json& tokens = root["special_tokens"];
    if (!tokens.is_object()) {
      status = absl::InvalidArgumentError(absl::StrCat(path, ": special_tokens must be an object of strings"));
    } else {
      for (const auto& [key, value] : tokens.items()) {
        if (!value.is_string()) {
          status = absl::InvalidArgumentError(absl::StrCat(path, ": special_tokens.", key, " must be a string"));
          break;
        }
        manifest.special_tokens.emplace_back(key, value.get<std::string>());
      }
    }
  }
  for (auto [field, target] : {std::pair{"vocab_size", &manifest.vocab_size},
                               {"hidden_size", &manifest.hidden_size},
                               {"intermediate_size", &manifest.intermediate_size},
                               {"num_layers", &manifest.num_layers},
                               {"num_heads", &manifest.num_heads},
                               {"num_kv_heads", &manifest.num_kv_heads},
                               {"head_dim", &manifest.head_dim},
                               {"max_context_length", &manifest.max_context_length}}) {
    if (status.ok()) status = ReadPositive(root, path, field, target);
  }
  if (!status.ok()) return status;
  if (manifest.dtype != "float32" && manifest.dtype != "bfloat16") {
    return absl::InvalidArgumentError(absl::StrCat(path, ": unsupported dtype '", manifest.dtype, "'"));
  }
  if (manifest.num_heads % manifest.num_kv_heads != 0) {
    return Missing(path, "num_heads", "a multiple of num_kv_heads");
  }
  manifest.format_version = version;
  RETURN_IF_ERROR(ReadChoice(root, path, "quantization", {"none", "int8", "int4", "mxfp4"}, "none, int8, int4 or mxfp4",
                             &manifest.quantization));
  if (manifest.quantization == "int4" && version < kInt4ManifestFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": int4 weights need format_version ",
                                                   kInt4ManifestFormatVersion, " or later, not ", version));
  }
  if (manifest.quantization == "mxfp4" && version < kMxfp4ManifestFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": MXFP4 experts need format_version ",
                                                   kMxfp4ManifestFormatVersion, " or later, not ", version));
  }
  RETURN_IF_ERROR(ReadChoice(root, path, "served_quantization", {"int8", "w8a16", "w8a8"}, "int8, w8a16 or w8a8",
                             &manifest.served_quantization));
  if (manifest.served_quantization != "int8" && manifest.quantization != "int8") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": served_quantization '", manifest.served_quantization, "' needs int8 weights"));
  }
  RETURN_IF_ERROR(ReadChoice(root, path, "embedding_pooling", {"none", "last", "mean"}, "last, mean or none",
                             &manifest.embedding_pooling));
  RETURN_IF_ERROR(ReadOutputFormats(root, path, manifest));
  RETURN_IF_ERROR(ReadMixtureOfExperts(root, path, manifest));
  if (manifest.quantization == "mxfp4" && manifest.moe_layers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": quantization 'mxfp4' is for the experts of a mixture, but the manifest has no moe_layers"));
  }
  if (root.contains("quantization_group_size")) {
    const json& group = root["quantization_group_size"];
    if (!group.is_number_integer() || group.get<int64_t>() < 0) {
      return Missing(path, "quantization_group_size", "0 or a positive group size");
    }
    manifest.quantization_group_size = group.get<int64_t>();
  }
  manifest.rms_norm_eps = root.value("rms_norm_eps", 1e-6);
  manifest.rope_theta = root.value("rope_theta", 10000.0);
  manifest.tie_word_embeddings = root.value("tie_word_embeddings", false);
  if (root.contains("bos_token_id") && root["bos_token_id"].is_number_integer()) {
    manifest.bos_token_id = root["bos_token_id"].get<int32_t>();
  }
  if (root.contains("eos_token_ids")) {
    if (!root["eos_token_ids"].is_array()) return Missing(path, "eos_token_ids", "a list of token ids");
    for (const auto& id : root["eos_token_ids"]) {
      if (!id.is_number_integer()) return Missing(path, "eos_token_ids", "a list of token ids");
      manifest.eos_token_ids.push_back(id.get<int32_t>());
    }
  }
  return manifest;
}

}  // namespace llmc::model
