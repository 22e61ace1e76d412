#include "worker/engine/batch_builder.h"

#include <algorithm>

#include "worker/engine/sequence.h"

namespace llmc::engine {
namespace {

template <typename T>
at::Tensor View(std::vector<T>& values, at::ScalarType type) {
  return at::from_blob(values.data(), {static_cast<int64_t>(values.size())}, at::TensorOptions().dtype(type));
}

}  // namespace

BatchBuilder::BatchBuilder(int64_t block_size, int64_t max_num_batched_tokens, int64_t max_running)
    : block_size_(block_size) {
  for (auto* buffer : {&input_ids_, &positions_, &slot_mapping_}) buffer->reserve(max_num_batched_tokens);
  logits_indices_.reserve(max_running + kMaxPromptLogprobRowsPerStep);
  seq_lens_.reserve(max_running);
  query_start_locs_.reserve(max_running + 1);
}

model::ForwardBatch BatchBuilder::Build(const std::vector<ScheduledChunk>& chunks) {
  for (auto* buffer : {&input_ids_, &positions_, &slot_mapping_, &logits_indices_, &hidden_rows_}) buffer->clear();
  seq_lens_.clear();
  query_start_locs_.assign(1, 0);
  size_t width = 1;
  for (const ScheduledChunk& chunk : chunks) width = std::max(width, chunk.sequence->block_table.size());
  const int64_t num_sequences = static_cast<int64_t>(chunks.size());
  block_tables_.assign(num_sequences * width, 0);

  for (int64_t s = 0; s < num_sequences; ++s) {
    const Sequence& sequence = *chunks[s].sequence;
    const int64_t first = sequence.num_computed, end = first + chunks[s].num_tokens;
    for (int64_t position = first; position < end; ++position) {
      input_ids_.push_back(sequence.tokens[position]);
      positions_.push_back(position);
      slot_mapping_.push_back(int64_t{sequence.block_table[position / block_size_]} * block_size_ +
                              position % block_size_);
    }
    seq_lens_.push_back(static_cast<int32_t>(end));
    query_start_locs_.push_back(static_cast<int32_t>(input_ids_.size()));
    const int64_t end_row = static_cast<int64_t>(input_ids_.size());
    switch (sequence.group.request.pooling) {
      case Pooling::kNone:
        if (chunks[s].samples) logits_indices_.push_back(end_row - 1);
        break;
      case Pooling::kLast:
        if (chunks[s].samples) hidden_rows_.push_back(end_row - 1);
        break;
      case Pooling::kMean:
        for (int64_t row = end_row - chunks[s].num_tokens; row < end_row; ++row) hidden_rows_.push_back(row);
        break;
    }
    std::copy(sequence.block_table.begin(), sequence.block_table.end(), block_tables_.begin() + s * width);
  }
  // Prompt logprob rows come after every sampling row, chunk by chunk, each chunk's from its first position.
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int64_t rows = chunks[s].sequence->PromptLogprobRows(chunks[s].num_tokens);
    for (int64_t row = query_start_locs_[s]; row < query_start_locs_[s] + rows; ++row) logits_indices_.push_back(row);
  }
  return model::ForwardBatch{
      View(input_ids_, at::kLong),
      View(positions_, at::kLong),
      View(slot_mapping_, at::kLong),
      View(block_tables_, at::kInt).view({num_sequences, static_cast<int64_t>(width)}),
      View(seq_lens_, at::kInt),
      View(query_start_locs_, at::kInt),
      View(logits_indices_, at::kLong),
      hidden_rows_.empty() ? at::Tensor() : View(hidden_rows_, at::kLong),
  };
}

}  // namespace llmc::engine
