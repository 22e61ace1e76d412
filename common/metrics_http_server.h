#ifndef LLMC_COMMON_METRICS_HTTP_SERVER_H_
#define LLMC_COMMON_METRICS_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/host_port.h"
#include "prometheus/registry.h"

namespace llmc {

// A small HTTP/1.1 server (Boost.Beast, one I/O thread) for a process's Prometheus metrics:
// GET /metrics answers the registry in the text exposition format, GET /health answers "ok".
class MetricsHttpServer {
 public:
  // `before_scrape` runs on the I/O thread before each /metrics answer, to refresh gauges derived from
  // live state; it must be thread-safe.
  MetricsHttpServer(std::shared_ptr<prometheus::Registry> registry, std::function<void()> before_scrape = {});
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds `listen_address` (port 0 picks a free port) and starts serving; returns the bound address.
  absl::StatusOr<HostPort> Start(const std::string& listen_address);
  void Stop();

  // The /metrics body, as served.
  std::string RenderMetrics();
  // Accepts that failed (e.g. out of file descriptors); each is followed by a short pause, not a retry.
  int64_t failed_accepts() const;

 private:
  struct Impl;
  std::shared_ptr<prometheus::Registry> registry_;
  std::function<void()> before_scrape_;
  std::unique_ptr<Impl> impl_;
  std::thread io_thread_;
};

}  // namespace llmc

#endif  // LLMC_COMMON_METRICS_HTTP_SERVER_H_
