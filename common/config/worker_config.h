#ifndef LLMC_COMMON_CONFIG_WORKER_CONFIG_H_
#define LLMC_COMMON_CONFIG_WORKER_CONFIG_H_

#include <string>

#include "absl/status/status.h"

namespace llmc::config {

// The `worker:` section. The engine settings arrive with the worker itself; this is its network identity.
struct WorkerConfig {
  std::string listen_address = "0.0.0.0:21002";
  std::string advertised_address;  // empty: derived from listen_address
  std::string controller_address = "127.0.0.1:21001";
  std::string worker_id;  // empty: hostname and pid
  std::string metrics_address = "0.0.0.0:21082";
  std::string log_level = "info";

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("listen_address", listen_address, "host:port of the Worker gRPC server");
    v("advertised_address", advertised_address, "host:port gateways dial; empty derives it from listen_address");
    v("controller_address", controller_address, "host:port of the controller");
    v("worker_id", worker_id, "unique id in the cluster; empty uses hostname and pid");
    v("metrics_address", metrics_address, "host:port of the HTTP /metrics endpoint; empty disables it");
    v("log_level", log_level, "debug, info, warning or error");
  }

  absl::Status Validate() const;
};

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_WORKER_CONFIG_H_
