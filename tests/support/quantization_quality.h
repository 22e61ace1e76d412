#ifndef LLMC_TESTS_SUPPORT_QUANTIZATION_QUALITY_H_
#define LLMC_TESTS_SUPPORT_QUANTIZATION_QUALITY_H_

#include <cstdint>
#include <vector>

#include "worker/model/loaded_model.h"

namespace llmc::testing {

// How far a quantized model's next-token distributions are from the reference's, teacher-forced over one
// token sequence (both models see the same tokens, never their own choices).
struct QuantizationQuality {
  int64_t positions = 0;
  double mean_kl = 0;  // mean over positions of KL(reference || quantized), in nats
  double max_kl = 0;
  double top1_agreement = 0;  // fraction of positions where both models' most likely token is the same
  // Where they differ, how much less likely (log-probability, nats) the reference finds the quantized model's
  // choice than its own; the largest over all positions (0 where they never differ). Two models that differ
  // only by rounding flip near-ties only, which a random-weight model has many of.
  double max_flip_margin = 0;
  // Fraction of positions (but the last) where the reference's most likely token is the one that follows in
  // `tokens`: how well the reference itself predicts the text.
  double reference_accuracy = 0;
};

// Prefills `tokens` through both models in chunks of `chunk` tokens (as the engine's chunked prefill does),
// taking every position's logits.
QuantizationQuality MeasureQuantizationQuality(model::LoadedModel& reference, model::LoadedModel& quantized,
                                               const std::vector<int64_t>& tokens, int64_t chunk = 128);
// The same over several texts, each prefilled from position 0: the figures of all their positions together.
QuantizationQuality MeasureQuantizationQuality(model::LoadedModel& reference, model::LoadedModel& quantized,
                                               const std::vector<std::vector<int64_t>>& texts, int64_t chunk = 128);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_QUANTIZATION_QUALITY_H_
