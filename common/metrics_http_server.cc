#include "common/metrics_http_server.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/logging.h"
#include "prometheus/text_serializer.h"

namespace llmc {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kIoTimeout = std::chrono::seconds(10);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

// The client's connection failed before it was accepted: nothing to wait for.
bool ConnectionFailed(const beast::error_code& error) {
  return error == asio::error::connection_aborted || error == asio::error::connection_reset || error.value() == EPROTO;
}
constexpr uint32_t kHeaderLimit = 8 * 1024;
constexpr uint64_t kBodyLimit = 1024;

// One connection: read a request, answer it, repeat while the client keeps the connection alive.
class MetricsSession : public std::enable_shared_from_this<MetricsSession> {
 public:
  MetricsSession(tcp::socket socket, std::function<std::string()> render)
      : stream_(std::move(socket)), render_(std::move(render)) {}

  void Start() { ReadRequest(); }

 private:
  void ReadRequest() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(kBodyLimit);
    stream_.expires_after(kIoTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code error, size_t) { self->OnRead(error); });
  }

  void OnRead(beast::error_code error) {
    if (error) return;  // closed, timed out or malformed: drop the connection
    const auto& request = parser_->get();
    response_ = {};
    response_.version(request.version());
    response_.keep_alive(request.keep_alive());
    response_.set(http::field::server, "llmc");
    if (request.method() != http::verb::get) {
      response_.result(http::status::method_not_allowed);
      response_.set(http::field::allow, "GET");
      response_.body() = "method not allowed\n";
    } else if (request.target() == "/metrics") {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      response_.body() = render_();
    } else if (request.target() == "/health") {
      response_.result(http::status::ok);
      response_.body() = "ok\n";
    } else {
      response_.result(http::status::not_found);
      response_.body() = "not found\n";
    }
    if (response_.result() != http::status::ok || request.target() != "/metrics") {
      response_.set(http::field::content_type, "text/plain; charset=utf-8");
    }
    response_.prepare_payload();
    stream_.expires_after(kIoTimeout);
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code write_error, size_t) {
      if (write_error || !self->response_.keep_alive()) {
        beast::error_code ignored;
        self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        return;
      }
      self->ReadRequest();
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::function<std::string()> render_;
};

}  // namespace

struct MetricsHttpServer::Impl {
  asio::io_context io_context{1};
  tcp::acceptor acceptor{io_context};
  asio::steady_timer accept_backoff{io_context};
  std::function<std::string()> render;
  std::atomic<int64_t> failed_accepts{0};
  bool failing = false;  // I/O thread only: log once per streak of failures

  void Accept() {
    acceptor.async_accept(asio::make_strand(io_context), [this](beast::error_code error, tcp::socket socket) {
      if (error == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (error && ConnectionFailed(error)) {
        Accept();
        return;
      }
      if (error) {
        // Out of file descriptors, say: the connection stays queued and accepting again at once would fail
        // again at once. Wait a little instead of spinning; log once per streak.
        failed_accepts.fetch_add(1);
        if (!failing) {
          LLMC_LOG(Warning) << "accepting a metrics connection failed: " << error.message();
        }
        failing = true;
        accept_backoff.expires_after(kAcceptBackoff);
        accept_backoff.async_wait([this](beast::error_code wait_error) {
          if (!wait_error && acceptor.is_open()) Accept();
        });
        return;
      }
      failing = false;
      std::make_shared<MetricsSession>(std::move(socket), render)->Start();
      Accept();
    });
  }
};

MetricsHttpServer::MetricsHttpServer(std::shared_ptr<prometheus::Registry> registry,
                                     std::function<void()> before_scrape)
    : registry_(std::move(registry)), before_scrape_(std::move(before_scrape)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

std::string MetricsHttpServer::RenderMetrics() {
  if (before_scrape_) before_scrape_();
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

absl::StatusOr<HostPort> MetricsHttpServer::Start(const std::string& listen_address) {
  auto parsed = ParseHostPort(listen_address, /*allow_port_zero=*/true);
  if (!parsed.ok()) return parsed.status();
  auto impl = std::make_unique<Impl>();
  impl->render = [this] { return RenderMetrics(); };
  beast::error_code error;
  const auto address = asio::ip::make_address(parsed->host, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", listen_address, "': host must be an IP address: ", error.message()));
  }
  const tcp::endpoint endpoint(address, parsed->port);
  impl->acceptor.open(endpoint.protocol(), error);
  if (!error) impl->acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) impl->acceptor.bind(endpoint, error);
  if (!error) impl->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen_address, ": ", error.message()));
  }
  HostPort bound{parsed->host, impl->acceptor.local_endpoint().port()};
  impl_ = std::move(impl);
  impl_->Accept();
  io_thread_ = std::thread([this] { impl_->io_context.run(); });
  return bound;
}

int64_t MetricsHttpServer::failed_accepts() const { return impl_ ? impl_->failed_accepts.load() : 0; }

void MetricsHttpServer::Stop() {
  if (!impl_) return;
  impl_->io_context.stop();
  if (io_thread_.joinable()) io_thread_.join();
  impl_.reset();
}

}  // namespace llmc
