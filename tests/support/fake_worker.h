#ifndef LLMC_TESTS_SUPPORT_FAKE_WORKER_H_
#define LLMC_TESTS_SUPPORT_FAKE_WORKER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "llmc/v1/controller.grpc.pb.h"

namespace llmc::testing {

// Plays a worker's side of the controller protocol over real gRPC: registers, heartbeats on an interval,
// registers again when told "unknown", and keeps trying while the controller is down. No model behind it.
class FakeWorker {
 public:
  FakeWorker(const std::string& controller_address, v1::RegisterWorkerRequest registration,
             absl::Duration heartbeat_interval);
  ~FakeWorker();

  void Start();
  // Stops heartbeating without deregistering, as a worker that hangs or loses its network would.
  void Silence();
  void SetLoad(const v1::WorkerLoad& load);
  void SetState(v1::WorkerState state);

  int successful_registrations() const { return registrations_.load(); }
  int accepted_heartbeats() const { return heartbeats_.load(); }
  const std::string& worker_id() const { return registration_.worker_id(); }

 private:
  void Run();
  bool TryRegister();
  void TryHeartbeat();

  std::unique_ptr<v1::Controller::Stub> stub_;
  const v1::RegisterWorkerRequest registration_;
  const absl::Duration heartbeat_interval_;
  absl::Mutex mu_;
  v1::WorkerLoad load_ ABSL_GUARDED_BY(mu_);
  v1::WorkerState state_ ABSL_GUARDED_BY(mu_) = v1::WORKER_STATE_READY;
  bool registered_ = false;  // owned by the run thread
  std::atomic<int> registrations_{0};
  std::atomic<int> heartbeats_{0};
  absl::Notification stop_;
  std::thread thread_;
};

// A registration for a worker serving `models` (comma-separated) at `address`.
v1::RegisterWorkerRequest MakeRegistration(const std::string& worker_id, const std::string& address,
                                           const std::string& models, uint32_t max_running = 8);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_FAKE_WORKER_H_
