#include "worker/engine/schedule_action.h"

#include <algorithm>

namespace llmc::engine {

void ScheduleAction::Run(StepData& step) {
  step.plan = scheduler_.Schedule();
  num_preemptions_ += static_cast<int64_t>(step.plan.preempted.size());
  prefix_cache_queries_ += step.plan.prefix_cache_queries;
  prefix_cache_hits_ += step.plan.prefix_cache_hits;
  if (observer_ != nullptr) {
    for (size_t i = 0; i < step.plan.preempted.size(); ++i) observer_->OnPreemption();
    if (step.plan.prefix_cache_queries > 0) {
      observer_->OnPrefixCacheLookup(step.plan.prefix_cache_queries, step.plan.prefix_cache_hits);
    }
  }
  for (const ScheduledChunk& chunk : step.plan.chunks) {
    RequestGroup& group = chunk.sequence->group;
    table_.MarkRunning(group);
    step.group_ids.push_back(group.id);
  }
  std::sort(step.group_ids.begin(), step.group_ids.end());
  step.group_ids.erase(std::unique(step.group_ids.begin(), step.group_ids.end()), step.group_ids.end());
}

}  // namespace llmc::engine
