#ifndef LLMC_WORKER_ENGINE_SCHEDULE_ACTION_H_
#define LLMC_WORKER_ENGINE_SCHEDULE_ACTION_H_

#include <cstdint>

#include "worker/engine/engine_observer.h"
#include "worker/engine/request_table.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// Decides the step's batch (scheduler.h) and accounts for it: requests that start running leave the
// waiting count, preemptions are counted. Engine thread only.
class ScheduleAction {
 public:
  ScheduleAction(Scheduler& scheduler, RequestTable& table, EngineObserver* observer)
      : scheduler_(scheduler), table_(table), observer_(observer) {}

  void Run(StepData& step);
  int64_t num_preemptions() const { return num_preemptions_; }
  int64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits() const { return prefix_cache_hits_; }

 private:
  Scheduler& scheduler_;
  RequestTable& table_;
  EngineObserver* const observer_;
  int64_t num_preemptions_ = 0;
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SCHEDULE_ACTION_H_
