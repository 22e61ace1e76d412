#ifndef LLMC_COMMON_CONFIG_WORKER_CONFIG_H_
#define LLMC_COMMON_CONFIG_WORKER_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/config/internal_auth_config.h"
#include "common/engine_limits.h"

namespace llmc::config {

// The `worker:` section: the model, the engine's limits and the worker's network identity.
struct WorkerConfig {
  // Model
  std::string model_path;  // a model package folder (docs/model-package.md)
  std::string model_name;  // empty: the manifest's name
  std::string device = "auto";
  std::string dtype;  // empty: the package's
  std::string
      quantization;  // empty: the package's; int8/w8a16/w8a8/int4/w4a16/w4a8 quantize a bf16/f32 package at load
  uint32_t quantization_group_size = 0;  // 0: one int8 scale per output row
  uint32_t max_model_len = 0;            // 0: the manifest's max_context_length

  // Engine
  uint64_t kv_cache_bytes = 0;  // 0: use kv_cache_memory_fraction
  double kv_cache_memory_fraction = kDefaultEngineLimits.kv_cache_memory_fraction;
  uint32_t block_size = kDefaultEngineLimits.block_size;
  uint32_t max_num_batched_tokens = kDefaultEngineLimits.max_num_batched_tokens;
  uint32_t max_running = kDefaultEngineLimits.max_running;
  uint32_t max_waiting = kDefaultEngineLimits.max_waiting;                                    // then RESOURCE_EXHAUSTED
  uint32_t max_consecutive_failed_steps = kDefaultEngineLimits.max_consecutive_failed_steps;  // then UNHEALTHY
  bool enable_prefix_caching = true;  // reuse the KV blocks of prompt prefixes seen before
  uint32_t num_threads = 0;           // intra-op threads for CPU kernels; 0 keeps libtorch's default
  absl::Duration request_timeout = absl::ZeroDuration();  // 0: no deadline beyond the caller's
  bool trust_request_chat_template = false;               // render a request's own chat_template
  uint32_t json_max_whitespace = 0;          // structured outputs: whitespace allowed at each place JSON allows it
  std::string tool_call_parser = "auto";     // a tool-call format name, or auto: the package's tool_call_format
  std::string reasoning_parser = "auto";     // auto (the package's reasoning markers), none or think
  std::string default_chat_template_kwargs;  // a JSON object; a request's chat_template_kwargs override its keys

  // Network
  std::string listen_address = "0.0.0.0:21002";
  std::string advertised_address;  // empty: derived from listen_address
  std::string controller_address = "127.0.0.1:21001";
  std::string worker_id;  // empty: hostname and pid
  std::string metrics_address = "0.0.0.0:21082";
  std::string metric_names = "both";
  absl::Duration heartbeat_interval = absl::Seconds(2);  // until the controller says otherwise
  absl::Duration drain_grace_period = absl::Seconds(30);
  std::string log_level = "info";
  InternalAuthConfig internal_auth;  // its keys sit at the top of the section

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("model_path", model_path, "model package folder (llmc-model.json, model.pt, tokenizer.json)");
    v("model_name", model_name, "name clients pass as `model`; empty uses the manifest's");
    v("device", device, "auto (CUDA when available), cpu, cuda or cuda:N");
    v("dtype", dtype, "float32 or bfloat16; empty uses the package's");
    v("quantization", quantization,
      "none; int8 (int8 weights, quantized at load unless the package is int8; on the CPU, activations "
      "quantized to int16 in small batches and to int8 from 8 rows); w8a16 or w8a8 (int8 weights, int16 or "
      "int8 activations in every batch, CPU only); int4 (4-bit weights in groups, CPU only: int8 activations "
      "where the CPU has AVX512-VNNI, int16 elsewhere); w4a16 or w4a8 (int4 with int16 or int8 activations); "
      "empty uses the package's");
    v("quantization_group_size", quantization_group_size,
      "int8 quantization at load: 0 for one scale per output row, or inputs per scale (32, 64, 128, 256, 512); "
      "int4: 32, 64 or 128 (0: 128)");
    v("max_model_len", max_model_len, "context length limit (prompt + completion); 0 uses the manifest's");
    v("kv_cache_bytes", kv_cache_bytes, "KV cache budget in bytes; 0 uses kv_cache_memory_fraction");
    v("kv_cache_memory_fraction", kv_cache_memory_fraction,
      "KV cache budget as a fraction of free device memory (of available RAM on CPU), when kv_cache_bytes is 0");
    v("block_size", block_size, "tokens per KV cache block");
    v("max_num_batched_tokens", max_num_batched_tokens, "token budget of one engine step (chunked prefill size)");
    v("max_running", max_running, "sequences run at once in the continuous batch");
    v("max_waiting", max_waiting, "requests queued before new ones get RESOURCE_EXHAUSTED");
    v("enable_prefix_caching", enable_prefix_caching,
      "keep full KV blocks under the hash of their tokens, so that requests sharing a prefix skip its prefill");
    v("max_consecutive_failed_steps", max_consecutive_failed_steps,
      "model steps failing in a row before the worker turns UNHEALTHY and leaves rotation");
    v("num_threads", num_threads, "intra-op CPU threads; 0 keeps libtorch's default");
    v("request_timeout", request_timeout, "deadline for one request; 0 means only the caller's deadline");
    v("trust_request_chat_template", trust_request_chat_template,
      "render the Jinja chat_template a request sends (vLLM's --trust-request-chat-template); off, such "
      "requests get 400");
    v("json_max_whitespace", json_max_whitespace,
      "structured outputs: 0 generates compact JSON (no whitespace a model can loop in); N > 0 allows up to N "
      "spaces, tabs or newlines wherever JSON allows whitespace (at most 16)");
    v("tool_call_parser", tool_call_parser,
      "how the model's tool calls are read: auto (the package's tool_call_format), none, hermes, qwen3_coder, "
      "llama3_json, pythonic, mistral, deepseek_v3, deepseek_v31 or harmony");
    v("reasoning_parser", reasoning_parser,
      "how the model's reasoning is read: auto (the package's reasoning markers), none (all text is content) or "
      "think (<think>...</think>)");
    v("default_chat_template_kwargs", default_chat_template_kwargs,
      "a JSON object of chat template variables every request gets under its own chat_template_kwargs, e.g. "
      "'{\"enable_thinking\": false}' (vLLM's --default-chat-template-kwargs); empty: none");
    v("listen_address", listen_address, "host:port of the Worker gRPC server (port 0 picks a free one)");
    v("advertised_address", advertised_address, "host:port gateways dial; empty derives it from listen_address");
    v("controller_address", controller_address, "host:port of the controller; empty runs without one");
    v("worker_id", worker_id, "unique id in the cluster; empty uses hostname and pid");
    v("metrics_address", metrics_address, "host:port of the HTTP /metrics endpoint; empty disables it");
    v("metric_names", metric_names,
      "llmc (llmc:* metrics), vllm (vLLM's vllm:* names, as the llm-d endpoint picker reads them) or both");
    v("heartbeat_interval", heartbeat_interval, "heartbeat period until the controller names its own");
    v("drain_grace_period", drain_grace_period, "on SIGTERM, how long in-flight streams may run before abort");
    internal_auth.VisitFields(v);
    v("log_level", log_level, "debug, info, warning or error");
  }

  absl::Status Validate() const;
};

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_WORKER_CONFIG_H_
