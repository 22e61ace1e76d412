#include "tools/batch/batch_config.h"

#include <cmath>

namespace llmc::batch {

absl::Status BatchConfig::Validate() const {
  if (model_path.empty()) return absl::InvalidArgumentError("--model_path is required");
  if (input.empty()) return absl::InvalidArgumentError("--input is required");
  if (output.empty()) return absl::InvalidArgumentError("--output is required (- writes stdout)");
  if (input_format != "auto" && input_format != "openai" && input_format != "prompts") {
    return absl::InvalidArgumentError("--input_format must be auto, openai or prompts");
  }
  if (max_tokens < 1) return absl::InvalidArgumentError("--max_tokens must be positive");
  if (!std::isfinite(temperature) || temperature < 0) {
    return absl::InvalidArgumentError("--temperature must be a number >= 0");
  }
  if (max_running < 1 || max_num_batched_tokens < max_running) {
    return absl::InvalidArgumentError("--max_running must be positive and at most --max_num_batched_tokens");
  }
  if (num_threads < 0 || kv_cache_bytes < 0 || max_model_len < 0) {
    return absl::InvalidArgumentError("--num_threads, --kv_cache_bytes and --max_model_len must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace llmc::batch
