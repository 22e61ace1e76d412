#ifndef LLMC_GATEWAY_HTTP_HTTP_SERVER_H_
#define LLMC_GATEWAY_HTTP_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "gateway/http/http_handler.h"
#include "gateway/http/http_server_options.h"

namespace llmc::gateway {

class HttpServerState;

// The gateway's HTTP/1.1 server (Boost.Beast): a fixed pool of I/O threads, each running its own io_context
// with a share of the connections, one session per connection on its own strand, keep-alive, size limits and timeouts,
// API-key checks and CORS in front of the routes. Unknown paths get 404 and known paths with another method 405, both
// in the OpenAI error envelope; every response carries X-Request-Id and every request is logged once.
class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options, std::shared_ptr<HttpObserver> observer = nullptr);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers `handler` for `method` ("GET", "POST", ...) on the exact `path`; before Start only. With API
  // keys configured, a route that `requires_auth` answers 401 unless the request presents one of them.
  void Route(std::string method, std::string path, HttpHandler handler, bool requires_auth = true);

  // Binds `listen_address` ("host:port"; port 0 picks a free port) and starts serving; returns the bound
  // address. Fails when the address is bad or cannot be bound. Once per server.
  absl::StatusOr<HostPort> Start(const std::string& listen_address);

  // The start of a graceful stop: closes the listener (new connections are refused), closes idle keep-alive
  // connections, and ends every response from now on with `Connection: close`. Requests already in flight
  // (and those arriving on connections already open) are still served. Idempotent.
  void StopAccepting();
  // Waits until no request is in flight (from its first byte to the end of its response); false when
  // `deadline` came first.
  bool WaitForRequests(absl::Time deadline);
  int64_t requests_in_flight() const;

  // Stops accepting, closes every connection (handlers still working get OnClientGone) and joins the I/O
  // threads. Writers held elsewhere become no-ops. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::shared_ptr<HttpServerState> state_;
  std::unique_ptr<Impl> impl_;
  std::vector<std::thread> threads_;
  bool started_ = false;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_HTTP_SERVER_H_
