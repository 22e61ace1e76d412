#include "common/config/gateway_config.h"

#include "common/config/validation.h"
#include "common/status_macros.h"

namespace llmc::config {

absl::Status GatewayConfig::Validate() const {
  RETURN_IF_ERROR(ValidateListenAddress("listen_address", listen_address));
  RETURN_IF_ERROR(ValidateDialAddress("controller_address", controller_address));
  for (const auto& key : api_keys) {
    if (key.empty()) return absl::InvalidArgumentError("api_keys must not contain empty keys");
  }
  return ValidateLogLevel("log_level", log_level);
}

}  // namespace llmc::config
