#ifndef LLMC_GATEWAY_GATEWAY_SERVER_H_
#define LLMC_GATEWAY_GATEWAY_SERVER_H_

#include <memory>

#include "absl/status/status.h"
#include "common/bounded_executor.h"
#include "common/config/gateway_config.h"
#include "common/host_port.h"
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
  WorkerChannels channels_;  // before router_: its refresh thread prunes them
  WorkerRouter router_;
  GenerationDispatcher dispatcher_;
  UnaryDispatcher worker_calls_;
  CompletionHandler completions_;
  WorkerCallHandler worker_call_handler_;
  BoundedExecutor large_bodies_;  // after the handlers, whose methods its tasks call: destroyed first
  std::unique_ptr<HttpServer> http_;
  HostPort address_;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_GATEWAY_SERVER_H_
