#ifndef LLMC_DISPATCH_REGISTERED_WORKER_H_
#define LLMC_DISPATCH_REGISTERED_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "llmc/v1/controller.pb.h"

namespace llmc::dispatch {

// What is known about one worker: its registration plus the latest heartbeat. The controller's registry
// keeps one per worker, and so does each gateway's copy of the routing table.
struct RegisteredWorker {
  std::string worker_id;
  std::string address;
  std::string version;
  std::vector<v1::ModelInfo> models;
  v1::WorkerLoad load;
  v1::WorkerState state = v1::WORKER_STATE_READY;
  double speed_weight = 1.0;
  // Picks since the last load report: counted at once so a burst between heartbeats spreads out.
  uint32_t picks_since_heartbeat = 0;
  absl::Time registered_at;
  absl::Time last_heartbeat;
  uint64_t heartbeats = 0;       // heartbeats accepted since registration: names the current load report
  uint64_t registration = 0;     // the controller's number for this registration
  uint64_t changed_version = 0;  // the registry's version when this entry last changed
  // The controller's only: the host the registration came from; only it may heartbeat or deregister.
  std::string peer;

  bool Serves(absl::string_view model) const;
  // Sequences the worker runs at once (at least 1).
  double Capacity() const;
  // Waiting + running + picks not yet reflected in a heartbeat, relative to capacity.
  double RelativeLoad() const;
};

// A worker's reported load with its figures made usable by the policies: the KV cache use within [0, 1]
// (1 when not a number), rates that are not finite or are negative as 0 (unknown), a prefill rate of at
// most 1e9 tokens/s and capacities (max_running, max_waiting) of at most kMaxReportedCapacity. Scores stay
// numbers, and no worker draws all the traffic by claiming a huge capacity, whatever a worker sends.
inline constexpr uint32_t kMaxReportedCapacity = 1 << 16;
v1::WorkerLoad SanitizedLoad(v1::WorkerLoad load);

// The worker as ListWorkers and the routing feed describe it, ages measured at `now`.
v1::WorkerInfo ToWorkerInfo(const RegisteredWorker& worker, absl::Time now);
// A gateway's copy of a worker from the controller's description; times are counted back from `now`.
RegisteredWorker FromWorkerInfo(const v1::WorkerInfo& info, absl::Time now);

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_REGISTERED_WORKER_H_
