#ifndef LLMC_WORKER_MODEL_LOADED_MODEL_H_
#define LLMC_WORKER_MODEL_LOADED_MODEL_H_

#include <torch/script.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/model/cpu/int8_staging.h"
#include "worker/model/model_manifest.h"

namespace llmc::model {

struct LoadOptions {
  std::string device = "auto";  // "auto" (CUDA when libtorch has it and a GPU is visible), "cpu", "cuda", "cuda:N"
  std::string dtype;            // empty: the package's; or "float32" / "bfloat16"
  // Empty: as the package is. "int8": a bfloat16/float32 package's projections are quantized at load
  // (weight-only, one scale per output row, or per group of quantization_group_size inputs); an int8
  // package stays int8. The CPU kernels quantize each activation row (per group of inputs, at run time) to
  // int16 for small batches and to int8 for larger ones (cpu/int8_staging.h). "w8a16" and "w8a8": int8
  // weights as "int8", with int16 or int8 activations for every batch. "int4": 4-bit weights (an int4 package, or
  // a bfloat16/float32 one quantized at load), with int8 activations (W4A8) where the CPU has AVX512-VNNI and
  // int16 (W4A16) elsewhere; "w4a16" and "w4a8" fix them. On CUDA int4 is W4A16 and w4a8 is refused. "none" refuses an
  // int8 package. "mxfp4": a package's MXFP4 experts as they are (the only way such a package is served).
  std::string quantization = "";
  int64_t quantization_group_size = 0;
  // On the CPU, repack the projection weights for the fused kernels (worker/model/cpu/). Off only to compare
  // against the composite ATen path.
  bool pack_weights = true;
  // On the CPU, put the packed weights and the KV cache on transparent huge pages (cpu/huge_page_arena.h).
  // Off only to measure what they bring.
  bool huge_pages = true;
  // On the CPU with packed weights, freeze the module once its weights are ready (torch::jit::freeze, every method
  // kept): the graphs then hold the weights as constants, and a step runs no attribute lookups through the layers'
  // objects. int4 decode steps ran 1-3 % faster (docs/performance.md). Off only to compare.
  bool freeze_graphs = true;
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
  // [H] int64, optional: rows whose final normalized hidden state the step also returns (embeddings).
  at::Tensor hidden_rows = {};
};

// What one step returns for sampling: the full logits of only the rows that need them, and the largest
// logits of every row, which is all greedy and top-k sampling read.
struct SamplingLogits {
  at::Tensor full_logits;  // [F, vocab] float32: logits rows full_rows[0..F), in that order
  at::Tensor top_values;   // [K, top_k] float32, largest first (equal values: lower id first)
  at::Tensor top_ids;      // [K, top_k] int64
  at::Tensor hidden;       // [H, hidden_size] float32 for the batch's hidden_rows; undefined when none
};

// A model package loaded for serving: the TorchScript module on its device and dtype, checked against the
// manifest. Not thread-safe: the engine thread owns it.
class LoadedModel {
 public:
  // Every failure (missing file, corrupt archive, shape mismatch, unsupported dtype or device) is a Status.
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const std::string& package_dir,
                                                           const LoadOptions& options = {});

  // The package's manifest, with quantization as served (after any quantization at load).
  const ModelManifest& manifest() const { return manifest_; }
  at::Device device() const { return device_; }
  at::ScalarType dtype() const { return dtype_; }
  // How many nodes of `kind` ("prim::GetAttr", "aten::reshape", ...) the sampling step's graph (forward_top_k) has.
  int64_t StepGraphNodes(const std::string& kind) const;

  // The paged KV cache: [layers, 2, num_blocks, block_size, kv_heads, head_dim], zeroed, on the device.
  absl::StatusOr<at::Tensor> AllocateKvCache(int64_t num_blocks, int64_t block_size) const;
  // Bytes one cache block takes across all layers.
  int64_t KvCacheBlockBytes(int64_t block_size) const;

  // float32 logits [K, vocab]. INVALID_ARGUMENT for inputs the model or operators reject.
  absl::StatusOr<at::Tensor> Forward(const ForwardBatch& batch, at::Tensor& kv_cache);

  // On the CPU, sizes the calling thread's kernel buffers for steps of up to `max_tokens` tokens and
  // `max_logits_rows` sampled rows with up to `max_top_k` top logits; call it on the thread that will step.
  void ReserveStepBuffers(int64_t max_tokens, int64_t max_logits_rows, int64_t max_top_k) const;

  // Whether the package serves embeddings: its manifest names a pooling and model.pt has forward_with_hidden.
  bool serves_embeddings() const { return manifest_.embedding_pooling != "none"; }

  // The step for sampling (the package's forward_top_k, or forward_with_hidden when the batch names
  // hidden_rows): full logits for the logits rows named by `full_rows`
  // (int64 [F], distinct, CPU), and the `top_k` largest logits of every logits row. Results on the model's
  // device.
  // `row_masks` (null, or one entry per logits row at most): allowed-token masks the LM head applies to those
  // rows' top logits, when masks_logits_in_pass().
  absl::StatusOr<SamplingLogits> ForwardForSampling(const ForwardBatch& batch, at::Tensor& kv_cache,
                                                    const at::Tensor& full_rows, int64_t top_k,
                                                    const std::vector<const uint64_t*>* row_masks = nullptr);
  // Whether the LM head ranks a masked row's allowed tokens only (the CPU kernels with packed weights); else a
  // masked row needs its full logits.
  bool masks_logits_in_pass() const { return masks_logits_in_pass_; }

 private:
  LoadedModel(ModelManifest manifest, torch::jit::Module module, at::Device device, at::ScalarType dtype,
              bool huge_pages, bool packed_weights)
      : manifest_(std::move(manifest)),
        module_(std::move(module)),
        device_(device),
        dtype_(dtype),
        huge_pages_(huge_pages),
        masks_logits_in_pass_(device.is_cpu() && packed_weights),
        int8_activations_(manifest_.quantization == "w8a8" || manifest_.quantization == "w4a8"
                              ? cpu::Int8Activations::kInt8
                          : manifest_.quantization == "w8a16" || manifest_.quantization == "w4a16"
                              ? cpu::Int8Activations::kInt16
                              : cpu::Int8Activations::kByBatch) {}
  // The forward's inputs on the model's device, `extra` (sampling's rows, embeddings' rows) after the batch's.
  std::vector<c10::IValue> Inputs(const ForwardBatch& batch, at::Tensor& kv_cache,
                                  const std::vector<at::Tensor>& extra = {}) const;

  ModelManifest manifest_;
  torch::jit::Module module_;
  at::Device device_;
  at::ScalarType dtype_;
  bool huge_pages_;
  bool masks_logits_in_pass_;
  // What the CPU kernels' threads are set to for this model's steps (cpu/int8_staging.h): by the batch when
  // served as int8, int16 as w8a16, int8 as w8a8.
  cpu::Int8Activations int8_activations_;
};

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_LOADED_MODEL_H_
