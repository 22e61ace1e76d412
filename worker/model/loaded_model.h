#ifndef LLMC_WORKER_MODEL_LOADED_MODEL_H_
#define LLMC_WORKER_MODEL_LOADED_MODEL_H_

#include <torch/script.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/model/model_manifest.h"

namespace llmc::model {

struct LoadOptions {
  std::string device = "auto";  // "auto" (CUDA when libtorch has it and a GPU is visible), "cpu", "cuda", "cuda:N"
  std::string dtype;            // empty: the package's; or "float32" / "bfloat16"
  // On the CPU, repack the projection weights for the fused kernels (worker/model/cpu/). Off only to compare
  // against the composite ATen path.
  bool pack_weights = true;
};

// One engine step's flattened batch (docs/model-package.md); tensors on any device, moved as needed.
struct ForwardBatch {
  at::Tensor input_ids;         // [T] int64
  at::Tensor positions;         // [T] int64
  at::Tensor slot_mapping;      // [T] int64
  at::Tensor block_tables;      // [S, max_blocks] int32
  at::Tensor seq_lens;          // [S] int32
  at::Tensor query_start_locs;  // [S + 1] int32
  at::Tensor logits_indices;    // [K] int64
};

// A model package loaded for serving: the TorchScript module on its device and dtype, checked against the
// manifest. Not thread-safe: the engine thread owns it.
class LoadedModel {
 public:
  // Every failure (missing file, corrupt archive, shape mismatch, unsupported dtype or device) is a Status.
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const std::string& package_dir,
                                                           const LoadOptions& options = {});

  const ModelManifest& manifest() const { return manifest_; }
  at::Device device() const { return device_; }
  at::ScalarType dtype() const { return dtype_; }

  // The paged KV cache: [layers, 2, num_blocks, block_size, kv_heads, head_dim], zeroed, on the device.
  absl::StatusOr<at::Tensor> AllocateKvCache(int64_t num_blocks, int64_t block_size) const;
  // Bytes one cache block takes across all layers.
  int64_t KvCacheBlockBytes(int64_t block_size) const;

  // float32 logits [K, vocab]. INVALID_ARGUMENT for inputs the model or operators reject.
  absl::StatusOr<at::Tensor> Forward(const ForwardBatch& batch, at::Tensor& kv_cache);

 private:
  LoadedModel(ModelManifest manifest, torch::jit::Module module, at::Device device, at::ScalarType dtype)
      : manifest_(std::move(manifest)), module_(std::move(module)), device_(device), dtype_(dtype) {}

  ModelManifest manifest_;
  torch::jit::Module module_;
  at::Device device_;
  at::ScalarType dtype_;
};

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_LOADED_MODEL_H_
