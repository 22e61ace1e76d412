#ifndef LLMC_GATEWAY_GATEWAY_SERVER_H_
#define LLMC_GATEWAY_GATEWAY_SERVER_H_

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/bounded_executor.h"
#include "common/config/gateway_config.h"
#include "common/host_port.h"
#include "common/internal_auth/cluster_credentials.h"
#include "gateway/completion_handler.h"
#include "gateway/dispatch/generation_dispatcher.h"
#include "gateway/dispatch/unary_dispatcher.h"
#include "gateway/dispatch/worker_channels.h"
#include "gateway/dispatch/worker_router.h"
#include "gateway/gateway_metrics.h"
#include "gateway/http/http_server.h"
#include "gateway/worker_call_handler.h"

namespace llmc::gateway {

// The gateway process: the HTTP server with the OpenAI routes, /health, /ready and /metrics, wired to the
// controller (routing) and the workers (generation) from one configuration.
class GatewayServer {
 public:
  explicit GatewayServer(config::GatewayConfig config);
  ~GatewayServer();
  GatewayServer(const GatewayServer&) = delete;
  GatewayServer& operator=(const GatewayServer&) = delete;

  absl::Status Start();
  // Graceful stop (SIGTERM): stops accepting connections and turns /ready 503, lets the requests in flight
  // finish for up to drain_grace_period, then ends the rest (streams with an error event, others with 503)
  // and Shutdown()s.
  void Drain();
  // Immediate stop: requests in flight are cut. Idempotent.
  void Shutdown();

  const HostPort& address() const { return address_; }

 private:
  void AddRoutes();
  void HandleModels(std::shared_ptr<ResponseWriter> writer);
  void HandleModel(const std::string& id, std::shared_ptr<ResponseWriter> writer);
  void HandleVersion(std::shared_ptr<ResponseWriter> writer);
  void HandleHealth(std::shared_ptr<ResponseWriter> writer);
  void HandleReady(std::shared_ptr<ResponseWriter> writer);
  void HandleMetrics(std::shared_ptr<ResponseWriter> writer);

  const config::GatewayConfig config_;
  std::shared_ptr<GatewayMetrics> metrics_;
  // What the gateway's calls to the controller and workers carry; an error here fails Start.
  const absl::StatusOr<internal_auth::ClusterCredentials> credentials_;
  WorkerChannels channels_;  // before router_: its refresh thread prunes them
  WorkerRouter router_;
  GenerationDispatcher dispatcher_;
  UnaryDispatcher worker_calls_;
  CompletionHandler completions_;
  WorkerCallHandler worker_call_handler_;
  BoundedExecutor large_bodies_;  // after the handlers, whose methods its tasks call: destroyed first
  std::unique_ptr<HttpServer> http_;
  HostPort address_;
  std::atomic<bool> draining_{false};
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_GATEWAY_SERVER_H_
