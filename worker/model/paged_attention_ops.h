#ifndef LLMC_WORKER_MODEL_PAGED_ATTENTION_OPS_H_
#define LLMC_WORKER_MODEL_PAGED_ATTENTION_OPS_H_

#include <ATen/ATen.h>

namespace llmc::model {

// The llmc:: operators that model packages call (schemas in tools/llmc_export/ops.py, documented in
// docs/model-package.md). Registration happens when this file's object is linked in; calling
// EnsurePagedAttentionOpsRegistered() from the loader guarantees that.
bool EnsurePagedAttentionOpsRegistered();

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

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_PAGED_ATTENTION_OPS_H_
