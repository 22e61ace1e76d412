#ifndef LLMC_TESTS_SUPPORT_FAKE_CONTROLLER_H_
#define LLMC_TESTS_SUPPORT_FAKE_CONTROLLER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "llmc/v1/controller.grpc.pb.h"

namespace llmc::testing {

// An in-process Controller on a loopback port that records what workers send: registrations, heartbeats and
// deregistrations. It can be told to forget a worker, whose next heartbeat is then answered unknown_worker.
// PickWorker and the list calls are not implemented.
class FakeController final : public v1::Controller::CallbackService {
 public:
  // `port` 0 picks a free port. Throws when it cannot listen.
  explicit FakeController(absl::Duration heartbeat_interval = absl::Milliseconds(100), int port = 0);
  ~FakeController() override;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  void Forget(const std::string& worker_id);
  bool Knows(const std::string& worker_id) const;
  std::vector<v1::RegisterWorkerRequest> registrations() const;
  std::vector<v1::HeartbeatRequest> heartbeats() const;
  std::vector<std::string> deregistrations() const;
  int registration_count() const;
  int heartbeat_count() const;

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* context,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* DeregisterWorker(grpc::CallbackServerContext* context,
                                             const v1::DeregisterWorkerRequest* request,
                                             v1::DeregisterWorkerResponse* response) override;

 private:
  const uint32_t heartbeat_interval_ms_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> known_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RegisterWorkerRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::HeartbeatRequest> heartbeats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> deregistrations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_FAKE_CONTROLLER_H_
