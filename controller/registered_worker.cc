#include "controller/registered_worker.h"

#include <algorithm>

namespace llmc::controller {

bool RegisteredWorker::Serves(absl::string_view model) const {
  return std::any_of(models.begin(), models.end(), [&](const v1::ModelInfo& info) { return info.name() == model; });
}

double RegisteredWorker::Capacity() const { return std::max<double>(1.0, load.max_running()); }

double RegisteredWorker::RelativeLoad() const {
  const double queued = static_cast<double>(load.num_waiting()) + load.num_running() + picks_since_heartbeat;
  return queued / Capacity();
}

}  // namespace llmc::controller
