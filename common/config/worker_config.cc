#include "common/config/worker_config.h"

#include "absl/strings/str_cat.h"
#include "common/config/validation.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace llmc::config {
namespace {

absl::Status ValidateAtLeast(absl::string_view key, uint64_t value, uint64_t minimum) {
  if (value >= minimum) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(key, " must be at least ", minimum, ", got ", value));
}

}  // namespace

absl::Status WorkerConfig::Validate() const {
  if (!dtype.empty()) RETURN_IF_ERROR(ValidateOneOf("dtype", dtype, {"float32", "bfloat16"}));
  if (!quantization.empty())
    RETURN_IF_ERROR(ValidateOneOf("quantization", quantization,
                                  {"none", "int8", "w8a16", "w8a8", "int4", "w4a16", "w4a8", "mxfp4"}));
  RETURN_IF_ERROR(ValidateOneOf("metric_names", metric_names, {"llmc", "vllm", "both"}));
  // The names of typed_output::ToolCallFormat (worker/typed_output/output_format.h), which common cannot link.
  RETURN_IF_ERROR(ValidateOneOf("tool_call_parser", tool_call_parser,
                                {"auto", "none", "hermes", "qwen3_coder", "llama3_json", "pythonic", "mistral",
                                 "deepseek_v3", "deepseek_v31", "harmony"}));
  RETURN_IF_ERROR(ValidateOneOf("reasoning_parser", reasoning_parser, {"auto", "none", "think"}));
  if (!default_chat_template_kwargs.empty() &&
      !nlohmann::json::parse(default_chat_template_kwargs, nullptr, /*allow_exceptions=*/false).is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("default_chat_template_kwargs must be a JSON object, got '", default_chat_template_kwargs, "'"));
  }
  if (quantization_group_size != 0 && quantization_group_size != 32 && quantization_group_size != 64 &&
      quantization_group_size != 128 && quantization_group_size != 256 && quantization_group_size != 512) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantization_group_size must be 0, 32, 64, 128, 256 or 512, got ", quantization_group_size));
  }
  if (quantization_group_size != 0 && (quantization.empty() || quantization == "none")) {
    return absl::InvalidArgumentError(
        "quantization_group_size applies only with quantization int8, w8a16, w8a8, int4, w4a16 or w4a8");
  }
  if ((quantization == "int4" || quantization == "w4a16" || quantization == "w4a8") && quantization_group_size > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("int4 quantization_group_size must be 32, 64 or 128 (0: 128), got ", quantization_group_size));
  }
  if (kv_cache_memory_fraction <= 0 || kv_cache_memory_fraction > 0.95) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_cache_memory_fraction must be in (0, 0.95], got ", kv_cache_memory_fraction));
  }
  if (block_size != 8 && block_size != 16 && block_size != 32) {
    return absl::InvalidArgumentError(absl::StrCat("block_size must be 8, 16 or 32, got ", block_size));
  }
  RETURN_IF_ERROR(ValidateAtLeast("max_num_batched_tokens", max_num_batched_tokens, 16));
  RETURN_IF_ERROR(ValidateAtLeast("max_running", max_running, 1));
  if (json_max_whitespace > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_max_whitespace must be at most 16, got ", json_max_whitespace));
  }
  RETURN_IF_ERROR(ValidateAtLeast("max_waiting", max_waiting, 1));
  RETURN_IF_ERROR(ValidateAtLeast("max_consecutive_failed_steps", max_consecutive_failed_steps, 1));
  if (max_running > max_num_batched_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("max_running (", max_running,
                                                   ") must not exceed max_num_batched_tokens (", max_num_batched_tokens,
                                                   "): every running sequence needs a token"));
  }
  if (request_timeout < absl::ZeroDuration()) return absl::InvalidArgumentError("request_timeout must not be negative");
  RETURN_IF_ERROR(ValidateListenAddress("listen_address", listen_address));
  if (!advertised_address.empty()) RETURN_IF_ERROR(ValidateDialAddress("advertised_address", advertised_address));
  if (!controller_address.empty()) RETURN_IF_ERROR(ValidateDialAddress("controller_address", controller_address));
  RETURN_IF_ERROR(ValidateListenAddress("metrics_address", metrics_address, /*allow_empty=*/true));
  RETURN_IF_ERROR(ValidatePositive("heartbeat_interval", heartbeat_interval));
  RETURN_IF_ERROR(ValidatePositive("drain_grace_period", drain_grace_period));
  RETURN_IF_ERROR(internal_auth.Validate());
  return ValidateLogLevel("log_level", log_level);
}

}  // namespace llmc::config
