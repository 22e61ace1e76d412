#include "tests/support/fake_controller.h"

#include <chrono>
#include <stdexcept>

#include "common/grpc_server.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace llmc::testing {
FakeController::FakeController(absl::Duration heartbeat_interval, int port)
    : heartbeat_interval_ms_(static_cast<uint32_t>(absl::ToInt64Milliseconds(heartbeat_interval))) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) throw std::runtime_error("fake controller: cannot listen");
}

FakeController::~FakeController() {
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

void FakeController::Forget(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  known_.erase(worker_id);
}

bool FakeController::Knows(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  return known_.contains(worker_id);
}

std::vector<v1::RegisterWorkerRequest> FakeController::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

std::vector<v1::HeartbeatRequest> FakeController::heartbeats() const {
  absl::MutexLock lock(&mu_);
  return heartbeats_;
}

std::vector<std::string> FakeController::deregistrations() const {
  absl::MutexLock lock(&mu_);
  return deregistrations_;
}

int FakeController::registration_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(registrations_.size());
}

int FakeController::heartbeat_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(heartbeats_.size());
}

grpc::ServerUnaryReactor* FakeController::RegisterWorker(grpc::CallbackServerContext* context,
                                                         const v1::RegisterWorkerRequest* request,
                                                         v1::RegisterWorkerResponse* response) {
  {
    absl::MutexLock lock(&mu_);
    registrations_.push_back(*request);
    known_.insert(request->worker_id());
  }
  response->set_heartbeat_interval_ms(heartbeat_interval_ms_);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* FakeController::Heartbeat(grpc::CallbackServerContext* context,
                                                    const v1::HeartbeatRequest* request,
                                                    v1::HeartbeatResponse* response) {
  {
    absl::MutexLock lock(&mu_);
    heartbeats_.push_back(*request);
    response->set_unknown_worker(!known_.contains(request->worker_id()));
  }
  response->set_heartbeat_interval_ms(heartbeat_interval_ms_);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* FakeController::DeregisterWorker(grpc::CallbackServerContext* context,
                                                           const v1::DeregisterWorkerRequest* request,
                                                           v1::DeregisterWorkerResponse* response) {
  {
    absl::MutexLock lock(&mu_);
    deregistrations_.push_back(request->worker_id());
    response->set_was_registered(known_.erase(request->worker_id()) > 0);
  }
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace llmc::testing
