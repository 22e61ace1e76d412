#ifndef LLMC_DISPATCH_WORKER_PICK_H_
#define LLMC_DISPATCH_WORKER_PICK_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/registered_worker.h"

namespace llmc::dispatch {

using WorkerMap = absl::flat_hash_map<std::string, RegisteredWorker>;

// The most picks one ReportPicks carries: gateways send no more, the controller refuses more.
inline constexpr int kMaxPicksPerReport = 4096;

// Which workers a pick may not choose, beyond those not serving the model or not ready.
struct PickFilter {
  absl::FunctionRef<bool(const RegisteredWorker&)> is_live;
  absl::FunctionRef<bool(absl::string_view worker_id)> is_excluded;
};

// Chooses a worker for `model` by `policy` among the live, ready, not excluded workers serving it, in a
// stable order (by id, so a seeded policy is reproducible), and counts the pick against it. NOT_FOUND
// (naming the models that are served) when no worker serves `model`; UNAVAILABLE, saying why, when some do
// but none can take it, and when no worker is registered at all (a starting cluster, a restarted controller). The
// controller's registry and the gateways' routing tables both pick with it.
absl::StatusOr<RegisteredWorker*> PickWorker(WorkerMap& workers, absl::string_view model, const PickFilter& filter,
                                             DispatchPolicy& policy, const PickRequest& request);

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_WORKER_PICK_H_
