#ifndef LLMC_CONTROLLER_CONTROLLER_SERVER_H_
#define LLMC_CONTROLLER_CONTROLLER_SERVER_H_

#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/config/controller_config.h"
#include "common/host_port.h"
#include "common/internal_auth/cluster_credentials.h"
#include "common/metrics_http_server.h"
#include "controller/controller_metrics.h"
#include "controller/controller_service.h"
#include "controller/routing_feed.h"
#include "controller/worker_registry.h"
#include "grpcpp/server.h"

namespace llmc::controller {

// The controller process: the gRPC server (Controller + grpc.health.v1), the expiry sweep thread and the
// metrics endpoint, wired from one configuration.
class ControllerServer {
 public:
  explicit ControllerServer(config::ControllerConfig config, const Clock& clock = Clock::Real());
  ~ControllerServer();
  ControllerServer(const ControllerServer&) = delete;
  ControllerServer& operator=(const ControllerServer&) = delete;

  // Binds and starts serving; fails with a Status (e.g. the port is taken) rather than crashing.
  absl::Status Start();
  // Marks health NOT_SERVING, stops the sweep and the servers. Idempotent.
  void Shutdown();

  const HostPort& grpc_address() const { return grpc_address_; }
  const HostPort& metrics_address() const { return metrics_address_; }
  WorkerRegistry& registry() { return *registry_; }

 private:
  void SweepLoop();

  const config::ControllerConfig config_;
  // The cluster secret and TLS files, loaded with the configuration; an error here fails Start.
  const absl::StatusOr<internal_auth::ClusterCredentials> credentials_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<ControllerMetrics> metrics_;
  std::unique_ptr<RoutingFeed> feed_;
  std::unique_ptr<ControllerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_server_;
  HostPort grpc_address_;
  HostPort metrics_address_;
  absl::Notification stop_sweep_;
  std::thread sweep_thread_;
  bool shut_down_ = false;
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_CONTROLLER_SERVER_H_
