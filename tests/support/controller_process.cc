#include "tests/support/controller_process.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "tests/support/cluster_secret.h"
#include "tests/support/grpc_channel.h"
#include "tests/support/wait.h"

namespace llmc::testing {
namespace {

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace

ControllerProcess::ControllerProcess(const std::string& binary, std::vector<std::string> extra_args, int grpc_port,
                                     std::vector<std::string> environment,
                                     const internal_auth::ClusterCredentials& client_credentials)
    : grpc_port_(grpc_port ? grpc_port : PickFreePort()), metrics_port_(PickFreePort()) {
  std::vector<std::string> args = {"--listen_address=" + address(),
                                   "--metrics_address=127.0.0.1:" + std::to_string(metrics_port_)};
  // A test's controller is a first start, not a restart its workers must find again: no warm-up, so an
  // unknown model is a 404 at once. The tests of restarts set their own.
  const bool sets_warmup = std::any_of(extra_args.begin(), extra_args.end(),
                                       [](const std::string& arg) { return arg.rfind("--routing_warmup", 0) == 0; });
  if (!sets_warmup) args.push_back("--routing_warmup=1ms");
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const std::string log = MakeTempDir("llmc-controller") + "/controller.log";
  process_ = std::make_unique<ChildProcess>(binary, args, log, WithTestClusterSecret(std::move(environment)));
  // Dialling before the port is open would put the channel into reconnect backoff.
  WaitUntil([&] { return !process_->running() || LoopbackPortAccepts(grpc_port_); }, absl::Seconds(20));
  auto channel = MakeTestChannel(address(), client_credentials);
  controller_ = v1::Controller::NewStub(channel);
  health_ = grpc::health::v1::Health::NewStub(channel);
  const bool serving = WaitUntil(
      [&] { return !process_->running() || HealthStatus("") == grpc::health::v1::HealthCheckResponse::SERVING; },
      absl::Seconds(20));
  if (!serving || !process_->running()) {
    throw std::runtime_error("llmc-controller did not become ready (health check: " + std::to_string(HealthStatus("")) +
                             "); its log:\n" + process_->ReadLog());
  }
}

int ControllerProcess::HealthStatus(const std::string& service) {
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_->Check(&context, request, &response);
  if (!status.ok()) return -static_cast<int>(status.error_code());
  return response.status();
}

std::vector<v1::WorkerInfo> ControllerProcess::ListWorkers() {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::ListWorkersResponse response;
  if (!controller_->ListWorkers(&context, v1::ListWorkersRequest(), &response).ok()) return {};
  return {response.workers().begin(), response.workers().end()};
}

}  // namespace llmc::testing
