#include "dispatch/worker_pick.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace llmc::dispatch {

absl::StatusOr<RegisteredWorker*> PickWorker(WorkerMap& workers, absl::string_view model, const PickFilter& filter,
                                             DispatchPolicy& policy, const PickRequest& request) {
  std::vector<RegisteredWorker*> candidates;
  size_t serving = 0, not_ready = 0, silent = 0, skipped = 0;
  for (auto& [id, worker] : workers) {
    if (!worker.Serves(model)) continue;
    ++serving;
    if (!filter.is_live(worker)) {
      ++silent;
    } else if (worker.state != v1::WORKER_STATE_READY) {
      ++not_ready;
    } else if (filter.is_excluded(id)) {
      ++skipped;
    } else {
      candidates.push_back(&worker);
    }
  }
  // No worker at all is a cluster starting (or a controller restarted): retryable, not "no such model".
  if (workers.empty()) return absl::UnavailableError("no worker is registered yet");
  if (serving == 0) {
    std::vector<std::string> known;
    for (const auto& [id, worker] : workers) {
      for (const auto& info : worker.models) known.push_back(info.name());
    }
    std::sort(known.begin(), known.end());
    known.erase(std::unique(known.begin(), known.end()), known.end());
    return absl::NotFoundError(absl::StrCat("model '", model, "' is not served by any worker (available: ",
                                            known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
  }
  if (candidates.empty()) {
    return absl::UnavailableError(absl::StrCat("no worker can take a request for model '", model, "' now (", not_ready,
                                               " starting or draining, ", silent, " silent, ", skipped,
                                               " already tried)"));
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const RegisteredWorker* a, const RegisteredWorker* b) { return a->worker_id < b->worker_id; });
  const std::vector<const RegisteredWorker*> view(candidates.begin(), candidates.end());
  RegisteredWorker* chosen = candidates[policy.Choose(view, request)];
  ++chosen->picks_since_heartbeat;
  return chosen;
}

}  // namespace llmc::dispatch
