#include "tests/support/quantization_quality.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace llmc::testing {
namespace {

constexpr int64_t kQualityBlockSize = 16;

// Logits of every position of `tokens`, prefilled `chunk` tokens per step into a cache of one sequence.
at::Tensor TeacherForcedLogits(model::LoadedModel& model, const std::vector<int64_t>& tokens, int64_t chunk) {
  const int64_t total = static_cast<int64_t>(tokens.size());
  const int64_t blocks = (total + kQualityBlockSize - 1) / kQualityBlockSize;
  auto cache = model.AllocateKvCache(blocks, kQualityBlockSize);
  if (!cache.ok()) throw std::runtime_error(std::string(cache.status().message()));
  const at::Tensor block_table = at::arange(blocks, at::kInt).unsqueeze(0);
  std::vector<at::Tensor> rows;
  for (int64_t start = 0; start < total; start += chunk) {
    const int64_t count = std::min(chunk, total - start);
    const at::Tensor positions = at::arange(start, start + count, at::kLong);
    model::ForwardBatch batch{
        at::tensor(std::vector<int64_t>(tokens.begin() + start, tokens.begin() + start + count), at::kLong),
        positions,
        positions,  // slot = position: block b holds positions 16b..16b+15
        block_table,
        at::tensor({static_cast<int32_t>(start + count)}, at::kInt),
        at::tensor({0, static_cast<int32_t>(count)}, at::kInt),
        at::arange(count, at::kLong)};
    auto logits = model.Forward(batch, *cache);
    if (!logits.ok()) throw std::runtime_error(std::string(logits.status().message()));
    rows.push_back(logits->to(at::kCPU));
  }
  return at::cat(rows, 0);
}

}  // namespace

QuantizationQuality MeasureQuantizationQuality(model::LoadedModel& reference, model::LoadedModel& quantized,
                                               const std::vector<int64_t>& tokens, int64_t chunk) {
  const at::Tensor p_log = at::log_softmax(TeacherForcedLogits(reference, tokens, chunk).to(at::kDouble), -1);
  const at::Tensor q_log = at::log_softmax(TeacherForcedLogits(quantized, tokens, chunk).to(at::kDouble), -1);
  const at::Tensor kl = (p_log.exp() * (p_log - q_log)).sum(-1);
  QuantizationQuality quality;
  quality.positions = kl.size(0);
  quality.mean_kl = kl.mean().item<double>();
  quality.max_kl = kl.max().item<double>();
  const at::Tensor reference_top1 = p_log.argmax(-1);
  const at::Tensor quantized_top1 = q_log.argmax(-1);
  quality.top1_agreement = reference_top1.eq(quantized_top1).to(at::kDouble).mean().item<double>();
  const at::Tensor margins =
      p_log.gather(1, reference_top1.unsqueeze(1)) - p_log.gather(1, quantized_top1.unsqueeze(1));
  quality.max_flip_margin = margins.max().item<double>();
  if (tokens.size() > 1) {
    const at::Tensor next = at::tensor(std::vector<int64_t>(tokens.begin() + 1, tokens.end()), at::kLong);
    quality.reference_accuracy =
        reference_top1.narrow(0, 0, next.size(0)).eq(next).to(at::kDouble).mean().item<double>();
  }
  return quality;
}

QuantizationQuality MeasureQuantizationQuality(model::LoadedModel& reference, model::LoadedModel& quantized,
                                               const std::vector<std::vector<int64_t>>& texts, int64_t chunk) {
  QuantizationQuality total;
  int64_t predicted = 0;  // positions that have a next token, for reference_accuracy
  for (const std::vector<int64_t>& text : texts) {
    const QuantizationQuality one = MeasureQuantizationQuality(reference, quantized, text, chunk);
    total.mean_kl += one.mean_kl * static_cast<double>(one.positions);
    total.top1_agreement += one.top1_agreement * static_cast<double>(one.positions);
    total.reference_accuracy += one.reference_accuracy * static_cast<double>(one.positions - 1);
    total.max_kl = std::max(total.max_kl, one.max_kl);
    total.max_flip_margin = std::max(total.max_flip_margin, one.max_flip_margin);
    total.positions += one.positions;
    predicted += one.positions - 1;
  }
  if (total.positions > 0) {
    total.mean_kl /= static_cast<double>(total.positions);
    total.top1_agreement /= static_cast<double>(total.positions);
  }
  if (predicted > 0) total.reference_accuracy /= static_cast<double>(predicted);
  return total;
}

}  // namespace llmc::testing
