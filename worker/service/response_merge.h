#ifndef LLMC_WORKER_SERVICE_RESPONSE_MERGE_H_
#define LLMC_WORKER_SERVICE_RESPONSE_MERGE_H_

#include "llmc/v1/worker.pb.h"

namespace llmc::worker {

// Folds `later` into `earlier`, as if one engine step had produced both: each choice keeps one delta (its
// first index; token ids, text and logprobs appended in order; the later finish and stop reasons), and
// the later usage wins. A stream whose reader is behind sends one message instead of a backlog.
void MergeInto(v1::GenerateResponse& earlier, v1::GenerateResponse later);

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_RESPONSE_MERGE_H_
