#ifndef LLMC_WORKER_SERVICE_RESPONSE_MERGE_H_
#define LLMC_WORKER_SERVICE_RESPONSE_MERGE_H_

#include <cstddef>
#include <vector>

#include "llmc/v1/worker.pb.h"

namespace llmc::worker {

// Folds `later` into `earlier`, as if one engine step had produced both: each choice keeps one delta (its
// first index; token ids, text and logprobs appended in order; the later finish and stop reasons), and
// the later usage wins. A stream whose reader is behind sends one message instead of a backlog.
void MergeInto(v1::GenerateResponse& earlier, v1::GenerateResponse later);

// `response` as messages that each stay within about `max_part_bytes`: when its prompt logprobs are larger,
// they go out in order over messages that carry nothing else, and the last part rides with the rest of the
// response (its deltas, usage). The gateway joins the parts until a message with deltas (a long prompt's
// logprobs at 20 alternatives pass the gRPC message limit). Each part has at least one entry.
std::vector<v1::GenerateResponse> SplitPromptLogprobs(v1::GenerateResponse response, size_t max_part_bytes);

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_RESPONSE_MERGE_H_
