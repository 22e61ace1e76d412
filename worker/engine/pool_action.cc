#include "worker/engine/pool_action.h"

#include <cmath>
#include <utility>

namespace llmc::engine {

void PoolAction::Run(StepData& step) {
  if (step.pooling.empty()) return;
  const int64_t width = step.hidden.defined() ? step.hidden.size(1) : 0;
  const float* rows = step.hidden.defined() ? step.hidden.data_ptr<float>() : nullptr;
  for (const StepData::PoolingChunk& chunk : step.pooling) {
    Sequence& sequence = *chunk.sequence;
    if (chunk.first) sequence.pooled.clear();
    // Sized by the first chunk with rows (a last-token chunk that does not end the prompt has none).
    if (chunk.num_rows > 0 && sequence.pooled.empty()) sequence.pooled.assign(width, 0.0f);
    for (int64_t row = 0; row < chunk.num_rows; ++row, rows += width) {
      for (int64_t i = 0; i < width; ++i) sequence.pooled[i] += rows[i];
    }
    if (!chunk.last) continue;

    // The mean's divisor cancels in the L2 normalization, so the sum is normalized directly.
    double squares = 0;
    for (const float value : sequence.pooled) squares += static_cast<double>(value) * value;
    const float scale = squares > 0 ? static_cast<float>(1.0 / std::sqrt(squares)) : 0.0f;
    v1::GenerateResponse response;
    response.mutable_embedding()->Reserve(static_cast<int>(width));
    for (const float value : sequence.pooled) response.add_embedding(value * scale);
    std::vector<float>().swap(sequence.pooled);
    table_.FinishChoice(sequence, v1::FINISH_REASON_STOP);
    table_.Respond(sequence.group, std::move(response), v1::FINISH_REASON_STOP);
  }
}

}  // namespace llmc::engine
