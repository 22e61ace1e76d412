#ifndef LLMC_WORKER_SERVICE_TOKEN_RESTRICTIONS_H_
#define LLMC_WORKER_SERVICE_TOKEN_RESTRICTIONS_H_

#include "absl/status/status.h"
#include "llmc/v1/types.pb.h"
#include "worker/engine/sampling_options.h"
#include "worker/service/served_model.h"

namespace llmc::worker {

// logit_bias, allowed_token_ids and bad_words into `options`, every id checked against the vocabulary and every
// size against common/request_limits.h (INVALID_ARGUMENT naming the field); `constrained` when the request
// carries a structured-output constraint, which beam search cannot follow.
absl::Status ResolveTokenRestrictions(const v1::SamplingParams& params, const ServedModel& model,
                                      engine::SamplingOptions& options);

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_TOKEN_RESTRICTIONS_H_
