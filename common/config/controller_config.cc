#include "common/config/controller_config.h"

#include "common/config/validation.h"
#include "common/status_macros.h"

namespace llmc::config {

absl::Status ControllerConfig::Validate() const {
  RETURN_IF_ERROR(ValidateListenAddress("listen_address", listen_address));
  RETURN_IF_ERROR(ValidateListenAddress("metrics_address", metrics_address, /*allow_empty=*/true));
  RETURN_IF_ERROR(ValidatePositive("heartbeat_interval", heartbeat_interval));
  if (expiry_missed_heartbeats == 0) {
    return absl::InvalidArgumentError("expiry_missed_heartbeats must be at least 1");
  }
  RETURN_IF_ERROR(ValidateOneOf("dispatch_policy", dispatch_policy, {"shortest_queue", "lottery"}));
  return ValidateLogLevel("log_level", log_level);
}

}  // namespace llmc::config
