#ifndef LLMC_TESTS_SUPPORT_CONTROLLER_PROCESS_H_
#define LLMC_TESTS_SUPPORT_CONTROLLER_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "llmc/v1/controller.grpc.pb.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_secret.h"

namespace llmc::testing {

// The real llmc-controller binary on free loopback ports, with clients for its services; the process and
// the clients share kTestClusterSecret (tests/support/cluster_secret.h).
class ControllerProcess {
 public:
  // Starts the binary with `extra_args` after the address flags and `environment` (NAME=VALUE) added to this
  // process's; `grpc_port` 0 picks a free port. The helper's clients use `client_credentials` (internal TLS
  // for a controller started with it). Throws when the process does not report SERVING on the health service
  // within 20 s.
  ControllerProcess(const std::string& binary, std::vector<std::string> extra_args, int grpc_port = 0,
                    std::vector<std::string> environment = {},
                    const internal_auth::ClusterCredentials& client_credentials = TestClusterCredentials());

  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  ChildProcess& process() { return *process_; }
  v1::Controller::Stub& controller() { return *controller_; }
  grpc::health::v1::Health::Stub& health() { return *health_; }

  // grpc.health.v1 Check for `service`; the gRPC status code on failure as a negative number.
  int HealthStatus(const std::string& service);
  std::vector<v1::WorkerInfo> ListWorkers();

 private:
  int grpc_port_;
  int metrics_port_;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<v1::Controller::Stub> controller_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// True when `controller` lists a worker with the id `worker_id`.
inline bool Listed(ControllerProcess& controller, const std::string& worker_id) {
  for (const auto& worker : controller.ListWorkers()) {
    if (worker.worker_id() == worker_id) return true;
  }
  return false;
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CONTROLLER_PROCESS_H_
