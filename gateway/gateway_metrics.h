#ifndef LLMC_GATEWAY_GATEWAY_METRICS_H_
#define LLMC_GATEWAY_GATEWAY_METRICS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gateway/http/http_server_options.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace llmc::gateway {

// The gateway's Prometheus metrics: requests by route and status, in-flight generations, time to first
// token, inter-token and end-to-end latency as clients see them, worker retries, rejections (429/503) and
// requests routed from the cached table. Thread-safe (prometheus-cpp).
class GatewayMetrics final : public HttpObserver {
 public:
  GatewayMetrics();

  std::shared_ptr<prometheus::Registry> prometheus_registry() const { return registry_; }

  void OnRequestDone(absl::string_view method, absl::string_view route, int status, absl::Duration duration) override;
  void OnConnectionOpened() override { open_connections_.Increment(); }
  void OnConnectionClosed() override { open_connections_.Decrement(); }
  void OnConnectionRefused() override { refused_connections_.Increment(); }
  void OnBodyBytesReserved(int64_t delta) override { inflight_body_bytes_.Increment(static_cast<double>(delta)); }
  void OnResponseBytesQueued(int64_t delta) override { queued_response_bytes_.Increment(static_cast<double>(delta)); }
  void GenerationStarted() { in_flight_.Increment(); }
  void GenerationEnded() { in_flight_.Decrement(); }
  void ObserveTimeToFirstToken(absl::Duration duration) { time_to_first_token_.Observe(Seconds(duration)); }
  void ObserveInterToken(absl::Duration duration) { inter_token_latency_.Observe(Seconds(duration)); }
  void ObserveEndToEnd(absl::Duration duration) { e2e_latency_.Observe(Seconds(duration)); }
  void CountRetries(int64_t retries) { retries_.Increment(static_cast<double>(retries)); }
  void CountRejection(const std::string& reason);
  void SetWorkerChannels(int64_t count) { worker_channels_.Set(static_cast<double>(count)); }

 private:
  static double Seconds(absl::Duration duration) { return absl::ToDoubleSeconds(duration); }

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Gauge& in_flight_;
  prometheus::Histogram& time_to_first_token_;
  prometheus::Histogram& inter_token_latency_;
  prometheus::Histogram& e2e_latency_;
  prometheus::Counter& retries_;
  prometheus::Gauge& worker_channels_;
  prometheus::Gauge& queued_response_bytes_;
  prometheus::Gauge& open_connections_;
  prometheus::Counter& refused_connections_;
  prometheus::Gauge& inflight_body_bytes_;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_GATEWAY_METRICS_H_
