#include "gateway/gateway_metrics.h"

#include "prometheus/counter.h"

namespace llmc::gateway {
namespace {

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                                  0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                                  7.5,   10.0,  20.0, 40.0, 80.0, 160.0};
  return buckets;
}

}  // namespace

GatewayMetrics::GatewayMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("llmc_gateway_requests_total")
                    .Help("HTTP requests by method, route and status code")
                    .Register(*registry_)),
      request_duration_(prometheus::BuildHistogram()
                            .Name("llmc_gateway_request_duration_seconds")
                            .Help("HTTP request duration by route, until the last byte of the answer")
                            .Register(*registry_)),
      rejections_(prometheus::BuildCounter()
                      .Name("llmc_gateway_rejections_total")
                      .Help("Generations refused by the cluster: queue_full (429) or unavailable (503)")
                      .Register(*registry_)),
      in_flight_(prometheus::BuildGauge()
                     .Name("llmc_gateway_requests_in_flight")
                     .Help("Generations being served")
                     .Register(*registry_)
                     .Add({})),
      time_to_first_token_(prometheus::BuildHistogram()
                               .Name("llmc_gateway_time_to_first_token_seconds")
                               .Help("Time from the request's arrival to its first generated token")
                               .Register(*registry_)
                               .Add({}, LatencyBuckets())),
      inter_token_latency_(prometheus::BuildHistogram()
                               .Name("llmc_gateway_inter_token_latency_seconds")
                               .Help("Time between token messages of one stream")
                               .Register(*registry_)
                               .Add({}, LatencyBuckets())),
      e2e_latency_(prometheus::BuildHistogram()
                       .Name("llmc_gateway_e2e_request_latency_seconds")
                       .Help("Time from a generation request's arrival to its end")
                       .Register(*registry_)
                       .Add({}, LatencyBuckets())),
      retries_(prometheus::BuildCounter()
                   .Name("llmc_gateway_worker_retries_total")
                   .Help("Generations sent to another worker after one refused or failed before its first token")
                   .Register(*registry_)
                   .Add({})),
      worker_channels_(prometheus::BuildGauge()
                           .Name("llmc_gateway_worker_channels")
                           .Help("gRPC channels to workers the gateway holds open (those of the routing table)")
                           .Register(*registry_)
                           .Add({})),
      queued_response_bytes_(prometheus::BuildGauge()
                                 .Name("llmc_gateway_queued_response_bytes")
                                 .Help("Response bytes waiting in the gateway for slow clients, over all connections")
                                 .Register(*registry_)
                                 .Add({})),
      open_connections_(prometheus::BuildGauge()
                            .Name("llmc_gateway_open_connections")
                            .Help("Client connections open (at most max_connections)")
                            .Register(*registry_)
                            .Add({})),
      refused_connections_(prometheus::BuildCounter()
                               .Name("llmc_gateway_refused_connections_total")
                               .Help("Connections refused with a 503 because max_connections were open")
                               .Register(*registry_)
                               .Add({})),
      inflight_body_bytes_(prometheus::BuildGauge()
                               .Name("llmc_gateway_inflight_body_bytes")
                               .Help("Request-body bytes being received, by declared length (at most "
                                     "max_inflight_body_bytes)")
                               .Register(*registry_)
                               .Add({})) {}

void GatewayMetrics::OnRequestDone(absl::string_view method, absl::string_view route, int status,
                                   absl::Duration duration) {
  const std::string route_label = route.empty() ? "unmatched" : std::string(route);
  requests_.Add({{"method", std::string(method)}, {"route", route_label}, {"status", std::to_string(status)}})
      .Increment();
  request_duration_.Add({{"route", route_label}}, LatencyBuckets()).Observe(Seconds(duration));
}

void GatewayMetrics::CountRejection(const std::string& reason) { rejections_.Add({{"reason", reason}}).Increment(); }

}  // namespace llmc::gateway
