#ifndef LLMC_GATEWAY_HTTP_HTTP_SERVER_OPTIONS_H_
#define LLMC_GATEWAY_HTTP_HTTP_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace llmc::gateway {

// Limits and policies of the HTTP server; the gateway fills them from config::GatewayConfig.
struct HttpServerOptions {
  uint32_t num_threads = 4;                                   // I/O threads, each with its own io_context
  uint64_t max_body_bytes = 8 << 20;                          // larger bodies get 413
  uint32_t max_header_bytes = 16 << 10;                       // larger header blocks get 431
  uint32_t max_connections = 4096;                            // beyond: a 503 written at once, then closed
  uint64_t max_inflight_body_bytes = 256ull << 20;            // bodies being received; beyond: 503 + Retry-After
  uint32_t retry_after_seconds = 1;                           // the Retry-After of those 503s
  absl::Duration read_timeout = absl::Seconds(30);            // from a request's first byte to its last
  absl::Duration idle_timeout = absl::Seconds(60);            // a keep-alive connection waiting for a request
  absl::Duration write_timeout = absl::Seconds(30);           // one write the client does not drain closes it
  absl::Duration sse_keepalive_interval = absl::Seconds(15);  // a comment chunk when a stream is this quiet
  uint32_t socket_send_buffer_bytes = 0;                      // SO_SNDBUF of client connections; 0: the OS's
  std::vector<std::string> api_keys;                          // empty: no authentication
  std::vector<std::string> cors_allow_origins;                // "*" allows any origin; empty: no CORS headers
};

// Hooks for metrics, called on I/O threads (so implementations must be thread-safe and quick).
class HttpObserver {
 public:
  virtual ~HttpObserver() = default;

  virtual void OnConnectionOpened() {}
  virtual void OnConnectionClosed() {}
  // A connection beyond max_connections, answered 503 and closed at once (no OnConnectionOpened).
  virtual void OnConnectionRefused() {}
  // Request-body bytes reserved against max_inflight_body_bytes (+ when a body starts to be received, -
  // when it is whole or the request failed).
  virtual void OnBodyBytesReserved(int64_t delta) {}
  // One call per request that got a response (or whose client went away, status 499). `route` is the
  // registered path, or "" for requests that matched none (404, malformed), so label sets stay bounded;
  // `method` is the request's method when some route uses it, else "OTHER".
  virtual void OnRequestDone(absl::string_view method, absl::string_view route, int status, absl::Duration duration) {}
  // Bytes of responses queued in the gateway for clients, not yet taken by the socket (+ queued, - written
  // or dropped).
  virtual void OnResponseBytesQueued(int64_t delta) {}
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_HTTP_SERVER_OPTIONS_H_
