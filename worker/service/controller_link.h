#ifndef LLMC_WORKER_SERVICE_CONTROLLER_LINK_H_
#define LLMC_WORKER_SERVICE_CONTROLLER_LINK_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/internal_auth/cluster_credentials.h"
#include "llmc/v1/controller.grpc.pb.h"

namespace llmc::worker {

struct ControllerLinkOptions {
  std::string controller_address;  // host:port
  std::string worker_id;
  std::string advertised_address;                        // what gateways dial
  absl::Duration heartbeat_interval = absl::Seconds(2);  // until the controller names its own
  absl::Duration rpc_timeout = absl::Seconds(2);
  internal_auth::ClusterCredentials credentials = {};  // what the calls to the controller carry
};

// The worker's side of the controller protocol, on its own thread: registers, heartbeats with the current
// load at the interval the controller answers, registers again when told unknown_worker (a restarted
// controller), and keeps retrying quietly while the controller is down. Nothing here blocks serving: the
// only shared state is the reported worker state, and `load` is called on the link's thread.
class ControllerLink {
 public:
  ControllerLink(ControllerLinkOptions options, v1::ModelInfo model, std::function<v1::WorkerLoad()> load);
  ~ControllerLink();
  ControllerLink(const ControllerLink&) = delete;
  ControllerLink& operator=(const ControllerLink&) = delete;

  void Start();
  // READY, DRAINING or UNHEALTHY, reported at once. A worker that is draining never registers again; an
  // unhealthy one registers (after a controller restart) as unhealthy.
  void SetState(v1::WorkerState state);
  // Stops the thread, then, when `deregister` and the worker ever registered, deregisters (one attempt,
  // bounded by the RPC timeout). Idempotent.
  void Stop(bool deregister);

  int successful_registrations() const { return registrations_.load(); }
  int accepted_heartbeats() const { return heartbeats_.load(); }

 private:
  void Run();
  absl::Status Register(v1::WorkerState state);
  // True when the controller answered unknown_worker.
  absl::StatusOr<bool> Heartbeat(v1::WorkerState state);
  void Deregister();
  void NoteReachable();
  void NoteFailure(const absl::Status& status);
  void SetDeadline(grpc::ClientContext& context) const;

  const ControllerLinkOptions options_;
  const v1::ModelInfo model_;
  const std::function<v1::WorkerLoad()> load_;
  std::unique_ptr<v1::Controller::Stub> stub_;
  std::atomic<int> registrations_{0};
  std::atomic<int> heartbeats_{0};
  std::thread thread_;
  bool stopped_ = false;  // Stop has run (caller's thread)

  absl::Mutex mu_;
  v1::WorkerState state_ ABSL_GUARDED_BY(mu_) = v1::WORKER_STATE_READY;
  absl::Duration interval_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // report now (state changed or stopping)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Owned by the link's thread (and by Stop after the join).
  bool registered_ = false;
  bool ever_registered_ = false;
  std::string last_error_;  // logged once per outage, not once per retry
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_CONTROLLER_LINK_H_
