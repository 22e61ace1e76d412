#include "gateway/http/http_server.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "common/logging.h"
#include "gateway/http/error_body.h"
#include "gateway/http/http_server_state.h"
#include "gateway/http/http_session.h"

namespace llmc::gateway {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// One io_context per I/O thread, each connection on one of them (in turn): a connection's reads, writes and
// handlers then run on the thread that waits for its socket, with no hand-off between threads (with one
// io_context shared by several threads, the thread that sees a socket ready often wakes another to run the
// handler, which costs a context switch on the first-token path).
struct HttpServer::Impl {
  using WorkGuard = asio::executor_work_guard<asio::io_context::executor_type>;

  explicit Impl(uint32_t num_threads) : contexts(MakeContexts(num_threads)) {
    // Keeps a thread whose io_context has no connection yet waiting for one, until Stop.
    for (auto& context : contexts) work.push_back(std::make_unique<WorkGuard>(asio::make_work_guard(*context)));
  }

  static std::vector<std::unique_ptr<asio::io_context>> MakeContexts(uint32_t num_threads) {
    std::vector<std::unique_ptr<asio::io_context>> contexts;
    for (uint32_t i = 0; i < num_threads; ++i) contexts.push_back(std::make_unique<asio::io_context>(1));
    return contexts;
  }

  asio::io_context& NextContext() { return *contexts[next_context++ % contexts.size()]; }

  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<std::unique_ptr<WorkGuard>> work;
  size_t next_context = 0;  // the accept strand's
  // Accepting runs on its own strand so that Stop can close the acceptor from another thread.
  tcp::acceptor acceptor{asio::make_strand(*contexts.front())};
  asio::steady_timer accept_backoff{acceptor.get_executor()};
  std::shared_ptr<HttpServerState> state;
  std::string refusal;  // the whole 503 answer to a connection beyond max_connections

  // A connection beyond max_connections: a 503 written once without waiting (a fresh socket's send buffer
  // takes it whole), then closed, so the refusal costs neither memory nor a session. A client that had
  // already sent its request may see only the close (the unread request makes the kernel reset it).
  void Refuse(tcp::socket socket) {
    error_code ignored;
    socket.non_blocking(true, ignored);
    socket.write_some(asio::buffer(refusal), ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    if (state->observer() != nullptr) state->observer()->OnConnectionRefused();
  }

  // Closes the acceptor on its own strand; safe from any thread.
  void CloseAcceptor() {
    asio::post(acceptor.get_executor(), [this] {
      error_code ignored;
      acceptor.close(ignored);
      accept_backoff.cancel();
    });
  }

  void Accept() {
    acceptor.async_accept(asio::make_strand(NextContext()), [this](error_code error, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (error) {
        // Out of file descriptors, say: wait a little instead of spinning on the failure.
        LLMC_LOG(Warning) << "accepting an HTTP connection failed: " << error.message();
        accept_backoff.expires_after(std::chrono::milliseconds(100));
        accept_backoff.async_wait([this](error_code wait_error) {
          if (!wait_error && acceptor.is_open()) Accept();
        });
        return;
      }
      error_code ignored;
      if (!state->TryOpenConnection()) {
        Refuse(std::move(socket));
        return Accept();
      }
      socket.set_option(tcp::no_delay(true), ignored);  // events must leave at once, not wait for Nagle
      if (state->options().socket_send_buffer_bytes > 0) {
        socket.set_option(
            asio::socket_base::send_buffer_size(static_cast<int>(state->options().socket_send_buffer_bytes)), ignored);
      }
      std::make_shared<HttpSession>(std::move(socket), state)->Start();
      Accept();
    });
  }
};

HttpServer::HttpServer(HttpServerOptions options, std::shared_ptr<HttpObserver> observer)
    : state_(std::make_shared<HttpServerState>(std::move(options), std::move(observer))) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Route(std::string method, std::string path, HttpHandler handler, bool requires_auth) {
  if (started_) {
    LLMC_LOG(Error) << "HttpServer::Route(" << method << " " << path << ") after Start is ignored";
    return;
  }
  state_->router().Add(std::move(method), std::move(path), std::move(handler), requires_auth);
}

absl::StatusOr<HostPort> HttpServer::Start(const std::string& listen_address) {
  if (started_) return absl::FailedPreconditionError("the HTTP server was already started");
  auto parsed = ParseHostPort(listen_address, /*allow_port_zero=*/true);
  if (!parsed.ok()) return parsed.status();
  const uint32_t threads = std::max<uint32_t>(1, state_->options().num_threads);
  auto impl = std::make_unique<Impl>(threads);
  impl->state = state_;
  const std::string body = OpenAiErrorBody(
      absl::StrCat("the gateway has ", state_->options().max_connections, " connections open, its limit; retry later"),
      "service_unavailable_error", "too_many_connections");
  impl->refusal = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nServer: llmc\r\nContent-Type: application/json\r\nContent-Length: ",
      body.size(), "\r\nRetry-After: ", state_->options().retry_after_seconds, "\r\nConnection: close\r\n\r\n", body);

  error_code error;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(parsed->host, error);
  if (!error) {
    endpoint = tcp::endpoint(address, parsed->port);
  } else {
    tcp::resolver resolver(*impl->contexts.front());
    const auto results = resolver.resolve(parsed->host, std::to_string(parsed->port), error);
    if (error || results.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot resolve HTTP listen address '", listen_address,
                                                     "': ", error ? error.message() : "no addresses"));
    }
    endpoint = results.begin()->endpoint();
  }
  impl->acceptor.open(endpoint.protocol(), error);
  if (!error) impl->acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) impl->acceptor.bind(endpoint, error);
  if (!error) impl->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", listen_address, ": ", error.message()));
  }
  HostPort bound{parsed->host, impl->acceptor.local_endpoint().port()};
  started_ = true;
  impl_ = std::move(impl);
  impl_->Accept();
  for (uint32_t i = 0; i < threads; ++i) {
    threads_.emplace_back([context = impl_->contexts[i].get()] { context->run(); });
  }
  LLMC_LOG(Info).With("address", bound.ToString()).With("threads", absl::StrCat(threads)) << "HTTP server listening";
  return bound;
}

void HttpServer::StopAccepting() {
  if (impl_ == nullptr || state_->draining()) return;
  impl_->CloseAcceptor();
  for (const auto& session : state_->BeginDrain()) session->CloseWhenIdle();
  LLMC_LOG(Info).With("requests", absl::StrCat(state_->requests_in_flight())) << "HTTP server stopped accepting";
}

bool HttpServer::WaitForRequests(absl::Time deadline) { return state_->AwaitNoRequests(deadline); }

int64_t HttpServer::requests_in_flight() const { return state_->requests_in_flight(); }

void HttpServer::Stop() {
  if (impl_ == nullptr) return;
  std::vector<std::shared_ptr<HttpSession>> sessions = state_->BeginStop();
  impl_->CloseAcceptor();
  for (const auto& session : sessions) session->Close();
  sessions.clear();
  // With the acceptor closed and every connection closed, the threads run out of work and return.
  for (auto& guard : impl_->work) guard->reset();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  impl_.reset();
}

}  // namespace llmc::gateway
