#include "tests/support/worker_process.h"

#include <stdexcept>
#include <utility>

#include "tests/support/cluster_secret.h"
#include "tests/support/grpc_channel.h"
#include "tests/support/wait.h"

namespace llmc::testing {

WorkerProcess::WorkerProcess(const std::string& binary, const std::string& model_path,
                             std::vector<std::string> extra_args, absl::Duration ready_timeout,
                             std::vector<std::string> environment,
                             const internal_auth::ClusterCredentials& client_credentials) {
  // A port picked free can be taken by another test process while the worker loads its model (it binds only
  // then): such a start is retried on other ports.
  constexpr int kStartAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    grpc_port_ = PickFreePort();
    metrics_port_ = PickFreePort();
    std::vector<std::string> args = {"--model_path=" + model_path, "--listen_address=" + address(),
                                     "--metrics_address=127.0.0.1:" + std::to_string(metrics_port_)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const std::string log = MakeTempDir("llmc-worker") + "/worker.log";
    process_ = std::make_unique<ChildProcess>(binary, args, log, WithTestClusterSecret(environment));
    // The gRPC port opens once the model is loaded; dialling earlier would put the channel into backoff.
    WaitUntil([&] { return !process_->running() || LoopbackPortAccepts(grpc_port_); }, ready_timeout);
    auto channel = MakeTestChannel(address(), client_credentials);
    worker_ = v1::Worker::NewStub(channel);
    health_ = grpc::health::v1::Health::NewStub(channel);
    const bool serving = WaitUntil(
        [&] { return !process_->running() || HealthStatus("") == grpc::health::v1::HealthCheckResponse::SERVING; },
        ready_timeout);
    if (serving && process_->running()) return;
    const std::string worker_log = process_->ReadLog();
    if (attempt < kStartAttempts && !process_->running() &&
        worker_log.find("Address already in use") != std::string::npos) {
      continue;
    }
    throw std::runtime_error("llmc-worker did not become ready; its log:\n" + worker_log);
  }
}

int WorkerProcess::HealthStatus(const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_->Check(&context, request, &response);
  if (!status.ok()) return -static_cast<int>(status.error_code());
  return response.status();
}

}  // namespace llmc::testing
