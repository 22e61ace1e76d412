// The CUDA implementations of the llmc:: operators: argument checks and row bookkeeping in ATen, then the
// plain CUDA kernels (the fused operators' CUDA versions are in cpu/fused_ops_composite.cc). Built only when libtorch
// has CUDA (LLMC_WITH_CUDA).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <limits>

#include "worker/model/paged_attention_cuda_kernels.h"
#include "worker/model/paged_attention_ops.h"

namespace llmc::model {
namespace {

cuda::ElementType ElementTypeOf(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.scalar_type() == at::kFloat || tensor.scalar_type() == at::kBFloat16,
              "llmc CUDA kernels support float32 and bfloat16, not ", tensor.scalar_type());
  return tensor.scalar_type() == at::kFloat ? cuda::ElementType::kFloat32 : cuda::ElementType::kBFloat16;
}

void WriteKvCacheCuda(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache, at::Tensor& value_cache,
                      const at::Tensor& slot_mapping) {
  // Custom operators get no device guard from the dispatcher: launch on the caches' device (cuda:N).
  const c10::cuda::CUDAGuard device_guard(key_cache.device());
  TORCH_CHECK(key_cache.is_contiguous() && value_cache.is_contiguous(), "write_kv_cache: caches must be contiguous");
  TORCH_CHECK(key.dim() == 3 && value.sizes() == key.sizes() && key.size(1) == key_cache.size(2) &&
                  key.size(2) == key_cache.size(3) && slot_mapping.size(0) == key.size(0),
              "write_kv_cache: key/value must be [tokens, kv_heads, head_dim] with one slot per token");
  const at::Tensor k = key.to(key_cache.dtype()).contiguous(), v = value.to(value_cache.dtype()).contiguous();
  const at::Tensor slots = slot_mapping.to(at::kLong).contiguous();
  cuda::WriteKvCacheParams params{k.data_ptr(),
                                  v.data_ptr(),
                                  key_cache.data_ptr(),
                                  value_cache.data_ptr(),
                                  slots.data_ptr<int64_t>(),
                                  static_cast<int>(k.size(0)),
                                  static_cast<int>(k.size(1) * k.size(2)),
                                  ElementTypeOf(key_cache)};
  const cudaError_t error = cuda::LaunchWriteKvCache(params, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(error == cudaSuccess, "write_kv_cache: ", cudaGetErrorString(error));
}

at::Tensor PagedAttentionCuda(const at::Tensor& query_in, const at::Tensor& key_cache_in,
                              const at::Tensor& value_cache_in, const at::Tensor& block_tables_in,
                              const at::Tensor& seq_lens, const at::Tensor& query_start_locs, double scale,
                              int64_t window, const c10::optional<at::Tensor>& sinks_in) {
  const c10::cuda::CUDAGuard device_guard(query_in.device());
  TORCH_CHECK(window >= 0 && window <= std::numeric_limits<int>::max(),
              "paged_attention: window must be 0 (the whole context) or positive");
  const at::Tensor query = query_in.contiguous(), key_cache = key_cache_in.contiguous();
  const at::Tensor value_cache = value_cache_in.contiguous(), block_tables = block_tables_in.to(at::kInt).contiguous();
  TORCH_CHECK(query.dim() == 3 && key_cache.dim() == 4 && query.size(1) % key_cache.size(2) == 0,
              "paged_attention: query [tokens, heads, head_dim] and cache [blocks, block_size, kv_heads, head_dim]");
  // Row bookkeeping on the device: each query row's sequence and position.
  const at::Tensor starts = query_start_locs.to(at::kLong);
  const at::Tensor counts = starts.narrow(0, 1, seq_lens.size(0)) - starts.narrow(0, 0, seq_lens.size(0));
  const at::Tensor row_sequence = at::repeat_interleave(at::arange(seq_lens.size(0), counts.options()), counts,
                                                        /*dim=*/0, /*output_size=*/query.size(0))
                                      .to(at::kInt);
  const at::Tensor row_offset =
      at::arange(query.size(0), counts.options()) - starts.index_select(0, row_sequence.to(at::kLong));
  const at::Tensor first_position = (seq_lens.to(at::kLong) - counts).index_select(0, row_sequence.to(at::kLong));
  const at::Tensor row_position = (first_position + row_offset).to(at::kInt).contiguous();
  const bool has_sinks = sinks_in.has_value() && sinks_in->defined() && sinks_in->numel() > 0;
  TORCH_CHECK(!has_sinks || sinks_in->numel() == query.size(1),
              "paged_attention: sinks must hold one logit per query head");
  const at::Tensor sinks = has_sinks ? sinks_in->to(query.device(), at::kFloat).contiguous() : at::Tensor();
  at::Tensor out = at::empty_like(query);
  cuda::PagedAttentionParams params{query.data_ptr(),
                                    key_cache.data_ptr(),
                                    value_cache.data_ptr(),
                                    block_tables.data_ptr<int32_t>(),
                                    row_sequence.contiguous().data_ptr<int32_t>(),
                                    row_position.data_ptr<int32_t>(),
                                    out.data_ptr(),
                                    static_cast<int>(query.size(0)),
                                    static_cast<int>(query.size(1)),
                                    static_cast<int>(key_cache.size(2)),
                                    static_cast<int>(query.size(2)),
                                    static_cast<int>(key_cache.size(1)),
                                    static_cast<int>(block_tables.size(1)),
                                    static_cast<float>(scale),
                                    ElementTypeOf(query),
                                    static_cast<int>(window),
                                    has_sinks ? sinks.data_ptr<float>() : nullptr};
  const cudaError_t error = cuda::LaunchPagedAttention(params, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(error == cudaSuccess, "paged_attention: ", cudaGetErrorString(error));
  return out;
}

}  // namespace

bool EnsurePagedAttentionCudaRegistered() { return true; }

}  // namespace llmc::model

TORCH_LIBRARY_IMPL(llmc, CUDA, m) {
  m.impl("write_kv_cache", &llmc::model::WriteKvCacheCuda);
  m.impl("paged_attention", &llmc::model::PagedAttentionCuda);
}
