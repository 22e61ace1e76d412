#include "common/config/worker_config.h"

#include "common/config/validation.h"
#include "common/status_macros.h"

namespace llmc::config {

absl::Status WorkerConfig::Validate() const {
  RETURN_IF_ERROR(ValidateListenAddress("listen_address", listen_address));
  if (!advertised_address.empty()) RETURN_IF_ERROR(ValidateDialAddress("advertised_address", advertised_address));
  RETURN_IF_ERROR(ValidateDialAddress("controller_address", controller_address));
  RETURN_IF_ERROR(ValidateListenAddress("metrics_address", metrics_address, /*allow_empty=*/true));
  return ValidateLogLevel("log_level", log_level);
}

}  // namespace llmc::config
