#ifndef LLMC_GATEWAY_HTTP_HTTP_SERVER_STATE_H_
#define LLMC_GATEWAY_HTTP_HTTP_SERVER_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/http/http_router.h"
#include "gateway/http/http_server_options.h"

namespace llmc::gateway {

class HttpSession;

// What the server shares with its sessions and their response writers, which may outlive the server
// object itself (a handler's gRPC callback can still hold a writer).
class HttpServerState {
 public:
  HttpServerState(HttpServerOptions options, std::shared_ptr<HttpObserver> observer);

  const HttpServerOptions& options() const { return options_; }
  // Mutable only before the server starts; read-only (and so lock-free) afterwards.
  HttpRouter& router() { return router_; }
  const HttpRouter& router() const { return router_; }
  HttpObserver* observer() const { return observer_.get(); }

  // Runs `fn` unless the server began stopping, holding off Stop until it returns. Writers post to the
  // io_context inside it, so nothing is posted to an io_context that is being torn down.
  bool RunWhileOpen(absl::FunctionRef<void()> fn);

  // False once the server is stopping: the session should close at once.
  bool AddSession(HttpSession* session, std::weak_ptr<HttpSession> handle);
  void RemoveSession(HttpSession* session);

  // The connection cap: false when max_connections are open already; else the caller holds one until
  // ConnectionClosed.
  bool TryOpenConnection();
  void ConnectionClosed();
  uint32_t open_connections() const { return connections_.load(std::memory_order_relaxed); }

  // The body budget: false when `bytes` more would pass max_inflight_body_bytes; else the caller holds
  // them until ReleaseBody.
  bool TryReserveBody(uint64_t bytes);
  void ReleaseBody(uint64_t bytes);
  uint64_t reserved_body_bytes() const { return body_bytes_.load(std::memory_order_relaxed); }

  // Requests from their first byte to the end of their response (or their client's leaving): what a drain
  // waits for. Each session counts at most one at a time.
  void RequestStarted();
  void RequestEnded();
  // Waits until no request is in flight; false when `deadline` came first.
  bool AwaitNoRequests(absl::Time deadline);
  int64_t requests_in_flight();

  // The drain: from now on every response says `Connection: close` and idle connections are closed.
  // Returns the sessions alive now, for the server to tell.
  std::vector<std::shared_ptr<HttpSession>> BeginDrain();
  bool draining() const { return draining_.load(std::memory_order_acquire); }

  // Closes the gate and returns the sessions alive now, for the server to close.
  std::vector<std::shared_ptr<HttpSession>> BeginStop();

 private:
  std::vector<std::shared_ptr<HttpSession>> LiveSessions() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sessions_mu_);

  const HttpServerOptions options_;
  HttpRouter router_;
  const std::shared_ptr<HttpObserver> observer_;

  std::atomic<uint32_t> connections_{0};
  std::atomic<uint64_t> body_bytes_{0};
  std::atomic<bool> draining_{false};

  absl::Mutex requests_mu_;
  int64_t requests_ ABSL_GUARDED_BY(requests_mu_) = 0;

  absl::Mutex gate_mu_;  // acquired before sessions_mu_ when both are held
  bool open_ ABSL_GUARDED_BY(gate_mu_) = true;

  absl::Mutex sessions_mu_;
  bool stopping_ ABSL_GUARDED_BY(sessions_mu_) = false;
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions_ ABSL_GUARDED_BY(sessions_mu_);
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_HTTP_SERVER_STATE_H_
