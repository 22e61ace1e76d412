#ifndef LLMC_WORKER_SERVICE_WORKER_SERVER_H_
#define LLMC_WORKER_SERVICE_WORKER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/config/worker_config.h"
#include "common/host_port.h"
#include "common/internal_auth/cluster_credentials.h"
#include "common/metrics_http_server.h"
#include "grpcpp/server.h"
#include "worker/engine/engine.h"
#include "worker/service/controller_link.h"
#include "worker/service/worker_metrics.h"
#include "worker/service/worker_service.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::worker {

// The worker process: model, tokenizer and engine, the gRPC server (Worker + grpc.health.v1), the metrics
// endpoint and the controller link, wired from one configuration. Not thread-safe: main calls Start, then
// Drain, from one thread.
class WorkerServer {
 public:
  explicit WorkerServer(config::WorkerConfig config);
  ~WorkerServer();
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  // Loads the model, starts the gRPC server (health NOT_SERVING), runs the engine's warm-up step, then
  // turns health SERVING and registers with the controller. Failures are a Status, never a crash.
  absl::Status Start();
  // Graceful stop: health NOT_SERVING, DRAINING reported to the controller, new requests refused with
  // UNAVAILABLE, in-flight streams given up to drain_grace_period, then the rest aborted, the worker
  // deregistered and the servers stopped. Idempotent; also safe after a failed Start.
  void Drain();

  const HostPort& grpc_address() const { return grpc_address_; }
  const HostPort& metrics_address() const { return metrics_address_; }
  const std::string& worker_id() const { return worker_id_; }

 private:
  absl::Status LoadEngine();
  absl::Status StartGrpc();
  void SetHealth(bool serving);
  std::string AdvertisedAddress() const;

  const config::WorkerConfig config_;
  const std::string worker_id_;
  internal_auth::ClusterCredentials credentials_;  // loaded first thing in Start
  // Declared in dependency order: the engine uses the tokenizer and reports to the metrics; the service
  // uses the engine; the server calls the service.
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_server_;
  // Set by Start on the main thread, read by the engine's unhealthy listener on its delivery thread.
  absl::Mutex link_mu_;
  std::unique_ptr<ControllerLink> link_;
  HostPort grpc_address_;
  HostPort metrics_address_;
  bool drained_ = false;
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_WORKER_SERVER_H_
