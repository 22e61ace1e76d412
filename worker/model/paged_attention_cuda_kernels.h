#ifndef LLMC_WORKER_MODEL_PAGED_ATTENTION_CUDA_KERNELS_H_
#define LLMC_WORKER_MODEL_PAGED_ATTENTION_CUDA_KERNELS_H_

// Plain CUDA launchers for the paged-cache operators: raw device pointers, no libtorch types, so nvcc
// compiles this file even where libtorch has no CUDA (CI checks it that way). The torch-facing glue is
// paged_attention_cuda.cc.

#include <cuda_runtime.h>

#include <cstdint>

namespace llmc::model::cuda {

enum class ElementType { kFloat32, kBFloat16 };

struct PagedAttentionParams {
  const void* query;            // [rows, heads, head_dim]
  const void* key_cache;        // [blocks, block_size, kv_heads, head_dim]
  const void* value_cache;      // same
  const int32_t* block_tables;  // [sequences, max_blocks]
  const int32_t* row_sequence;  // [rows]: the sequence each query row belongs to
  const int32_t* row_position;  // [rows]: its position; it attends to positions 0..row_position
  void* out;                    // [rows, heads, head_dim]
  int num_rows;
  int num_heads;
  int num_kv_heads;
  int head_dim;  // a multiple of 32, at most 256
  int block_size;
  int max_blocks;
  float scale;
  ElementType element_type;
  int window = 0;                // > 0: a row sees positions row_position - window + 1 .. row_position only; 0: all
  const float* sinks = nullptr;  // [heads] float32: a logit per head in each row's softmax, weighing no value
};

struct WriteKvCacheParams {
  const void* key;              // [tokens, kv_heads, head_dim]
  const void* value;            // same
  void* key_cache;              // [blocks, block_size, kv_heads, head_dim]
  void* value_cache;            // same
  const int64_t* slot_mapping;  // [tokens]
  int num_tokens;
  int row_elements;  // kv_heads * head_dim
  ElementType element_type;
};

cudaError_t LaunchPagedAttention(const PagedAttentionParams& params, cudaStream_t stream);
cudaError_t LaunchWriteKvCache(const WriteKvCacheParams& params, cudaStream_t stream);

}  // namespace llmc::model::cuda

#endif  // LLMC_WORKER_MODEL_PAGED_ATTENTION_CUDA_KERNELS_H_
