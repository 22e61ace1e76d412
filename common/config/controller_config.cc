#include "common/config/controller_config.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
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
  if (routing_warmup < absl::ZeroDuration()) return absl::InvalidArgumentError("routing_warmup must be >= 0");
  RETURN_IF_ERROR(
      ValidateOneOf("dispatch_policy", dispatch_policy, {"shortest_queue", "lottery", "power_of_two", "prefix_aware"}));
  for (const auto& [name, weight] : {std::pair<const char*, double>{"prefix_weight", prefix_weight},
                                     {"load_weight", load_weight},
                                     {"kv_weight", kv_weight}}) {
    if (!std::isfinite(weight) || weight < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be a finite number >= 0, got ", weight));
    }
  }
  if (prefix_index_entries == 0) return absl::InvalidArgumentError("prefix_index_entries must be at least 1");
  if (max_workers < 1 || max_workers > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("max_workers must be in [1, 65536], got ", max_workers));
  }
  RETURN_IF_ERROR(internal_auth.Validate());
  return ValidateLogLevel("log_level", log_level);
}

}  // namespace llmc::config
