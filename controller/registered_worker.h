#ifndef LLMC_CONTROLLER_REGISTERED_WORKER_H_
#define LLMC_CONTROLLER_REGISTERED_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "llmc/v1/controller.pb.h"

namespace llmc::controller {

// What the controller knows about one worker: its registration plus the latest heartbeat.
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

  bool Serves(absl::string_view model) const;
  // Sequences the worker runs at once (at least 1).
  double Capacity() const;
  // Waiting + running + picks not yet reflected in a heartbeat, relative to capacity.
  double RelativeLoad() const;
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_REGISTERED_WORKER_H_
