#ifndef LLMC_WORKER_MODEL_CPU_READ_AHEAD_H_
#define LLMC_WORKER_MODEL_CPU_READ_AHEAD_H_

// Between two projections of a decode step the team's workers wait while the calling thread finishes one
// operator and starts the next (back through the interpreter, the next operator's checks and allocations, the
// staging of its input), and no weight streams from memory meanwhile. A step runs its projections in the same
// order every time, so each projection learns which one followed it, and its workers read the start of their
// share of that one into their caches while they wait (TeamMember::ReadWhileWaiting).
#include <ATen/ATen.h>

#include <cstdint>

#include "worker/model/cpu/thread_team.h"

namespace llmc::model::cpu {

struct NextPanels {
  c10::Storage memory;  // keeps the panels alive until the workers have read them
  const char* data = nullptr;
  int64_t panels = 0;
  int64_t panel_bytes = 0;
};

// On the thread that runs the operators, before the projection over `packed` (panels of panel_bytes): records
// that it follows the previous projection this thread ran, and returns the one that followed it last time (none
// the first time, or once that weight is freed).
NextPanels FollowingPanels(const at::Tensor& packed, int64_t panel_bytes);

// Inside a team job, on a member whose part of the projection is done: the start of its share of `next` (as
// WorkQueue shares panels) to read while it waits for the next job. Nothing on the calling thread.
void ReadShareWhileWaiting(TeamMember& member, const NextPanels& next);

// On by default; off for benchmarks that compare a step with and without it in the same run (process-wide).
void SetReadAheadEnabled(bool enabled);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_READ_AHEAD_H_
