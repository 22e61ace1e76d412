#ifndef LLMC_TESTS_CONTROLLER_REGISTRY_TEST_SUPPORT_H_
#define LLMC_TESTS_CONTROLLER_REGISTRY_TEST_SUPPORT_H_

#include <memory>
#include <string>

#include "common/clock.h"
#include "controller/worker_registry.h"
#include "dispatch/dispatch_policy.h"
#include "tests/support/fake_worker.h"

namespace llmc::controller {

using dispatch::MakeDispatchPolicy;

inline constexpr uint64_t kFixedSeed = 20261122;

inline std::unique_ptr<WorkerRegistry> MakeRegistry(const Clock& clock, const std::string& policy,
                                                    absl::Duration expiry = absl::Seconds(6)) {
  return std::make_unique<WorkerRegistry>(clock, expiry, MakeDispatchPolicy(policy, kFixedSeed).value());
}

inline v1::HeartbeatRequest MakeHeartbeat(const std::string& worker_id, uint32_t waiting, uint32_t running,
                                          uint32_t max_running = 8,
                                          v1::WorkerState state = v1::WORKER_STATE_UNSPECIFIED) {
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker_id);
  heartbeat.mutable_load()->set_num_waiting(waiting);
  heartbeat.mutable_load()->set_num_running(running);
  heartbeat.mutable_load()->set_max_running(max_running);
  heartbeat.set_state(state);
  return heartbeat;
}

}  // namespace llmc::controller

#endif  // LLMC_TESTS_CONTROLLER_REGISTRY_TEST_SUPPORT_H_
