#ifndef LLMC_COMMON_CONFIG_GATEWAY_CONFIG_H_
#define LLMC_COMMON_CONFIG_GATEWAY_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llmc::config {

// The `gateway:` section. The HTTP limits and routing settings arrive with the gateway itself.
struct GatewayConfig {
  std::string listen_address = "0.0.0.0:8000";
  std::string controller_address = "127.0.0.1:21001";
  std::vector<std::string> api_keys;  // empty: no authentication
  std::string log_level = "info";

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("listen_address", listen_address, "host:port of the OpenAI-compatible HTTP server");
    v("controller_address", controller_address, "host:port of the controller");
    v("api_keys", api_keys, "accepted bearer API keys; empty list disables authentication");
    v("log_level", log_level, "debug, info, warning or error");
  }

  absl::Status Validate() const;
};

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_GATEWAY_CONFIG_H_
