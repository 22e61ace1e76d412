#ifndef LLMC_TESTS_SUPPORT_WORKER_PROCESS_H_
#define LLMC_TESTS_SUPPORT_WORKER_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "llmc/v1/worker.grpc.pb.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_secret.h"

namespace llmc::testing {

// The real llmc-worker binary serving `model_path` on free loopback ports, with clients for its services.
class WorkerProcess {
 public:
  // Starts the binary with `extra_args` after the model and address flags, and `environment` (NAME=VALUE)
  // added to this process's. The helper's clients use `client_credentials`. Throws, with the worker's log,
  // when it does not report SERVING on the health service within `ready_timeout` (a worker that found its picked
  // port taken is started again on others, up to three times).
  WorkerProcess(const std::string& binary, const std::string& model_path, std::vector<std::string> extra_args,
                absl::Duration ready_timeout = absl::Seconds(120), std::vector<std::string> environment = {},
                const internal_auth::ClusterCredentials& client_credentials = TestClusterCredentials());

  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  ChildProcess& process() { return *process_; }
  v1::Worker::Stub& worker() { return *worker_; }

  // grpc.health.v1 Check for `service`; the gRPC status code on failure as a negative number.
  int HealthStatus(const std::string& service);

 private:
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<v1::Worker::Stub> worker_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_WORKER_PROCESS_H_
