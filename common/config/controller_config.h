#ifndef LLMC_COMMON_CONFIG_CONTROLLER_CONFIG_H_
#define LLMC_COMMON_CONFIG_CONTROLLER_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/config/internal_auth_config.h"

namespace llmc::config {

// The `controller:` section.
struct ControllerConfig {
  std::string listen_address = "0.0.0.0:21001";
  std::string metrics_address = "0.0.0.0:21081";
  absl::Duration heartbeat_interval = absl::Seconds(2);
  uint32_t expiry_missed_heartbeats = 3;
  // After start, how long the routing table is "warming": workers of a previous controller re-register on
  // their next heartbeat, and gateways keep the workers they knew meanwhile. 0: expiry_after().
  absl::Duration routing_warmup = absl::ZeroDuration();
  std::string dispatch_policy = "shortest_queue";
  uint64_t dispatch_seed = 0;
  // prefix_aware: the weights of a worker's score, and how many prefix chunk hashes it remembers.
  double prefix_weight = 1.0;
  double load_weight = 1.0;
  double kv_weight = 0.5;
  uint64_t prefix_index_entries = 1 << 20;
  // Workers a controller keeps at most: registrations of new ids beyond it are refused.
  uint32_t max_workers = 1024;
  std::string log_level = "info";
  InternalAuthConfig internal_auth;  // its keys sit at the top of the section

  // A worker is dropped when its last heartbeat is older than this.
  absl::Duration expiry_after() const { return heartbeat_interval * expiry_missed_heartbeats; }
  absl::Duration effective_routing_warmup() const {
    return routing_warmup > absl::ZeroDuration() ? routing_warmup : expiry_after();
  }

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("listen_address", listen_address, "host:port of the gRPC server (port 0 picks a free one)");
    v("metrics_address", metrics_address, "host:port of the HTTP /metrics endpoint; empty disables it");
    v("heartbeat_interval", heartbeat_interval, "how often workers are told to send heartbeats");
    v("expiry_missed_heartbeats", expiry_missed_heartbeats, "missed heartbeats after which a worker is dropped");
    v("routing_warmup", routing_warmup,
      "after start, how long gateways keep the workers they knew while workers re-register; 0: "
      "expiry_missed_heartbeats x heartbeat_interval");
    v("dispatch_policy", dispatch_policy,
      "how PickWorker chooses: shortest_queue, lottery, power_of_two or prefix_aware");
    v("dispatch_seed", dispatch_seed, "seed of the dispatch random generator; 0 seeds from the OS");
    v("prefix_weight", prefix_weight, "prefix_aware: weight of the prompt tokens a worker likely holds cached");
    v("load_weight", load_weight,
      "prefix_aware: weight of the prefill tokens a worker likely has queued and of its queue relative to capacity");
    v("kv_weight", kv_weight, "prefix_aware: weight of a worker's KV cache use");
    v("prefix_index_entries", prefix_index_entries, "prefix_aware: prefix chunk hashes remembered (LRU)");
    v("max_workers", max_workers, "workers registered at once at most; registrations of new ids beyond it are refused");
    internal_auth.VisitFields(v);
    v("log_level", log_level, "debug, info, warning or error");
  }

  absl::Status Validate() const;
};

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_CONTROLLER_CONFIG_H_
