#ifndef LLMC_WORKER_MODEL_PAGED_ATTENTION_OPS_H_
#define LLMC_WORKER_MODEL_PAGED_ATTENTION_OPS_H_

#include <ATen/ATen.h>

namespace llmc::model {

// The llmc:: operators that model packages call (schemas in tools/llmc_export/ops.py, documented in
// docs/model-package.md). Registration happens when this file's object is linked in; calling
// EnsurePagedAttentionOpsRegistered() from the loader guarantees that.
bool EnsurePagedAttentionOpsRegistered();
#ifdef LLMC_WITH_CUDA
// The CUDA implementations' object (paged_attention_cuda.cc) would otherwise be left out of the static library's
// link, since nothing else refers to it.
bool EnsurePagedAttentionCudaRegistered();
#endif

// CPU kernels, also callable directly (tests, benchmarks). paged_attention's window: 0 attends to the whole
// context; W > 0 lets the query at position p see positions p - W + 1 .. p only (Hugging Face's sliding window:
// key > p - W), and the kernel reads no cache block wholly before the window. sinks ([num_heads], any floating
// dtype; absent or empty: none): GPT-OSS's attention sinks, one logit per head in each row's softmax that weighs no
// value.
void WriteKvCacheCpu(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache, at::Tensor& value_cache,
                     const at::Tensor& slot_mapping);
at::Tensor PagedAttentionCpu(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                             const at::Tensor& block_tables, const at::Tensor& seq_lens,
                             const at::Tensor& query_start_locs, double scale, int64_t window = 0,
                             const c10::optional<at::Tensor>& sinks = c10::nullopt);

// paged_attention splits each context into chunks of this many tokens (rounded down to whole cache blocks, at
// least one), attended as separate work items and merged (split decoding): a decode row keeps every thread busy
// even with one KV head (Gemma 3), and a long context's chunks each walk all the row's KV heads together. The split
// depends only on a row's position, never on the batch: a sequence gets the same values alone or batched.
constexpr int64_t kAttentionChunkTokens = 128;
constexpr int64_t kWholeContext = int64_t{1} << 40;
// PagedAttentionCpu with chunks of `chunk_tokens` (kWholeContext: none), whatever the model's KV heads.
at::Tensor PagedAttentionCpuInChunks(const at::Tensor& query, const at::Tensor& key_cache,
                                     const at::Tensor& value_cache, const at::Tensor& block_tables,
                                     const at::Tensor& seq_lens, const at::Tensor& query_start_locs, double scale,
                                     int64_t window, const c10::optional<at::Tensor>& sinks, int64_t chunk_tokens);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_PAGED_ATTENTION_OPS_H_
