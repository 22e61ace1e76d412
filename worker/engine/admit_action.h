#ifndef LLMC_WORKER_ENGINE_ADMIT_ACTION_H_
#define LLMC_WORKER_ENGINE_ADMIT_ACTION_H_

#include "absl/time/time.h"
#include "worker/engine/request_inbox.h"
#include "worker/engine/request_table.h"

namespace llmc::engine {

// The step's first action: what other threads handed in since the last step enters the engine. New
// requests join the table (their choices queue with the scheduler), aborted ones end CANCELLED, those past
// their deadline DEADLINE_EXCEEDED. Engine thread only.
class AdmitAction {
 public:
  AdmitAction(RequestInbox& inbox, RequestTable& table) : inbox_(inbox), table_(table) {}

  // False once the engine is stopping. With nothing in flight, first sleeps until something arrives
  // (at most `idle_wait`).
  bool Run(absl::Duration idle_wait);

 private:
  void ExpireDeadlines();

  RequestInbox& inbox_;
  RequestTable& table_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_ADMIT_ACTION_H_
