#ifndef LLMC_COMMON_CONFIG_GATEWAY_CONFIG_H_
#define LLMC_COMMON_CONFIG_GATEWAY_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config/internal_auth_config.h"

namespace llmc::config {

// The `gateway:` section: the OpenAI-compatible HTTP server, its limits, and how it reaches workers.
struct GatewayConfig {
  std::string listen_address = "0.0.0.0:8000";
  std::string controller_address = "127.0.0.1:21001";
  std::vector<std::string> api_keys;            // with api_keys_file and LLMC_API_KEYS; none: no authentication
  std::string api_keys_file;                    // one key per line, read at start; "" for none
  bool allow_unauthenticated = false;           // needed to listen beyond loopback without any key
  std::vector<std::string> cors_allow_origins;  // empty: no CORS headers
  bool metrics_require_api_key = true;          // false: Prometheus may scrape /metrics without a key
  bool cache_salt_per_api_key = false;          // prefix-cache blocks shared only among requests with one key
  bool serve_web_chat = true;                   // the chat page at /
  uint32_t num_threads = 4;                     // HTTP I/O threads
  uint64_t max_body_bytes = 8 << 20;
  uint64_t max_response_bytes = 128ull << 20;  // one non-streamed answer, held until it is whole
  uint32_t max_header_bytes = 16 << 10;
  uint32_t max_connections = 4096;                            // concurrent client connections; beyond: 503 and close
  uint64_t max_inflight_body_bytes = 256ull << 20;            // request bodies being received, over all connections
  absl::Duration read_timeout = absl::Seconds(30);            // to receive a whole request
  absl::Duration idle_timeout = absl::Seconds(60);            // keep-alive connections with no request
  absl::Duration write_timeout = absl::Seconds(30);           // a client that takes no bytes this long is dropped
  uint32_t socket_send_buffer_bytes = 0;                      // SO_SNDBUF of client connections; 0: the OS's
  absl::Duration sse_keepalive_interval = absl::Seconds(15);  // comment lines on quiet streams
  absl::Duration request_timeout = absl::Seconds(600);        // deadline of one generation
  absl::Duration routing_refresh_interval = absl::Seconds(2);
  uint32_t max_attempts = 3;                                // workers tried when one refuses before the first token
  absl::Duration worker_accept_timeout = absl::Seconds(5);  // a worker that has not taken a stream by then is skipped
  absl::Duration worker_call_timeout = absl::Seconds(30);   // one attempt of a unary worker call (tokenize, embed)
  uint32_t retry_after_seconds = 1;                         // the Retry-After of a 429
  absl::Duration drain_grace_period = absl::Seconds(30);    // on SIGTERM, how long running requests may finish
  std::string log_level = "info";
  InternalAuthConfig internal_auth;  // its keys sit at the top of the section

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("listen_address", listen_address, "host:port of the OpenAI-compatible HTTP server (port 0 picks a free one)");
    v("controller_address", controller_address, "host:port of the controller");
    v("api_keys", api_keys,
      "accepted bearer API keys, merged with those of api_keys_file and the LLMC_API_KEYS environment variable "
      "(comma-separated); with none at all, authentication is off");
    v("api_keys_file", api_keys_file,
      "file of accepted bearer API keys, one per line (blank lines and lines starting with # are skipped), read "
      "at start: a Kubernetes Secret mounted as a file");
    v("allow_unauthenticated", allow_unauthenticated,
      "allow listening on a non-loopback address with no API key; without it such a gateway refuses to start");
    v("cors_allow_origins", cors_allow_origins, "origins allowed by CORS (* for any); empty disables CORS");
    v("metrics_require_api_key", metrics_require_api_key,
      "whether /metrics needs an API key when api_keys are set (/health never does, for probes)");
    v("cache_salt_per_api_key", cache_salt_per_api_key,
      "salt each request's prefix cache with a keyed hash of its API key (HMAC-SHA256, never the key itself), "
      "joined with the request's cache_salt: requests made with different keys never share cached blocks, nor "
      "learn through cached_tokens or routing what another key's prompts were");
    v("serve_web_chat", serve_web_chat, "serve the browser chat page at /");
    v("num_threads", num_threads, "HTTP I/O threads, each with its own io_context; connections go to them in turn");
    v("max_body_bytes", max_body_bytes, "largest request body accepted (at most 32 MiB); larger gets 413");
    v("max_header_bytes", max_header_bytes, "largest request header block accepted");
    v("max_response_bytes", max_response_bytes,
      "largest non-streamed answer the gateway holds for one request (at least 1 MiB): a request whose answer "
      "could never fit gets 400 naming the numbers, and an answer that grows past it ends with a 400; streamed "
      "answers are not bounded by it");
    v("max_connections", max_connections,
      "concurrent client connections per gateway process; one beyond gets a 503 and is closed at once");
    v("max_inflight_body_bytes", max_inflight_body_bytes,
      "request bodies being received at once over all connections (by declared length; a chunked body counts "
      "max_body_bytes); a request that would pass it gets 503 with Retry-After before its body is read");
    v("read_timeout", read_timeout, "time allowed to receive one whole request");
    v("idle_timeout", idle_timeout, "how long an idle keep-alive connection stays open");
    v("write_timeout", write_timeout, "a client that accepts no bytes of a response for this long is disconnected");
    v("socket_send_buffer_bytes", socket_send_buffer_bytes,
      "kernel send buffer of each client connection (SO_SNDBUF); 0 keeps the OS's autotuning");
    v("sse_keepalive_interval", sse_keepalive_interval, "comment lines keep quiet event streams alive this often");
    v("request_timeout", request_timeout, "deadline of one generation (504 past it)");
    v("routing_refresh_interval", routing_refresh_interval,
      "the longest wait before watching the routing table again after its stream broke");
    v("max_attempts", max_attempts, "workers tried when one refuses (queue full, draining) before the first token");
    v("worker_accept_timeout", worker_accept_timeout,
      "a worker that does not accept a generation stream this fast (stopped, overloaded host) is skipped and "
      "another tried; 0 waits up to request_timeout");
    v("worker_call_timeout", worker_call_timeout,
      "a worker that does not answer a tokenize, detokenize or embeddings call this fast (stopped, overloaded) "
      "is skipped and another tried; none left: 503. 0 waits up to request_timeout");
    v("retry_after_seconds", retry_after_seconds, "Retry-After header of 429 and 503 answers");
    v("drain_grace_period", drain_grace_period,
      "on SIGTERM the gateway stops accepting connections and lets running requests finish for this long; then "
      "streams end with an error event and other requests get 503");
    internal_auth.VisitFields(v);
    v("log_level", log_level, "debug, info, warning or error");
  }

  absl::Status Validate() const;

  // api_keys, then the keys of api_keys_file, then those of LLMC_API_KEYS (`environment_keys`, the
  // variable's value), without duplicates. Fails when the file cannot be read.
  absl::StatusOr<std::vector<std::string>> EffectiveApiKeys(const char* environment_keys) const;
  // Fails, saying what to do, when the gateway would listen beyond loopback with no API key and
  // allow_unauthenticated is not set. Loopback: 127.0.0.0/8, ::1 and "localhost".
  absl::Status CheckExposure(const std::vector<std::string>& effective_keys) const;
};

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_GATEWAY_CONFIG_H_
