#include "tools/chat/http_exchange.h"

#include <unistd.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace llmc::chat {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr uint32_t kMaxHeaderBytes = 64 << 10;
constexpr size_t kMaxCollectedBodyBytes = 16 << 20;

// The steps of one exchange as Asio handlers on a private io_context; everything runs on the caller's thread
// inside Run(), so no member needs a lock.
class Exchange {
 public:
  Exchange(const bench::ServerUrl& url, const HttpExchangeRequest& request, const HttpExchangeCallbacks& callbacks)
      : url_(url), request_(request), callbacks_(callbacks), resolver_(io_), stream_(io_), cancel_watch_(io_) {}

  absl::StatusOr<int> Run() {
    WatchCancelFd();
    resolver_.async_resolve(url_.host, url_.port, [this](beast::error_code ec, tcp::resolver::results_type results) {
      OnResolve(ec, std::move(results));
    });
    io_.run();
    if (cancelled_) return absl::CancelledError("interrupted");
    if (!failure_.ok()) return failure_;
    return status_;
  }

 private:
  std::string Server() const { return absl::StrCat("http://", url_.HostHeader()); }

  void WatchCancelFd() {
    if (request_.cancel_fd < 0) return;
    // A duplicate, because the descriptor object closes what it holds.
    const int fd = dup(request_.cancel_fd);
    if (fd < 0) return;
    cancel_watch_.assign(fd);
    cancel_watch_.async_wait(net::posix::stream_descriptor::wait_read, [this](beast::error_code ec) {
      if (!ec && !ended_) {
        cancelled_ = true;
        End();
      }
    });
  }

  void OnResolve(beast::error_code ec, tcp::resolver::results_type results) {
    if (ended_) return;
    if (ec) return Fail(absl::UnavailableError(absl::StrCat("cannot resolve ", url_.host, ": ", ec.message())));
    stream_.expires_after(Timeout());
    stream_.async_connect(results, [this](beast::error_code connect_ec, const tcp::endpoint&) {
      if (ended_) return;
      if (connect_ec) return FailIo("cannot connect to", connect_ec);
      Write();
    });
  }

  void Write() {
    message_.method(http::string_to_verb(request_.method));
    message_.target(request_.path);
    message_.version(11);
    message_.set(http::field::host, url_.HostHeader());
    message_.set(http::field::user_agent, "llmc-chat");
    message_.set(http::field::accept, request_.accept);
    if (!request_.api_key.empty()) message_.set(http::field::authorization, "Bearer " + request_.api_key);
    if (!request_.body.empty()) {
      message_.set(http::field::content_type, "application/json");
      message_.body() = request_.body;
    }
    message_.keep_alive(false);
    message_.prepare_payload();
    stream_.expires_after(Timeout());
    http::async_write(stream_, message_, [this](beast::error_code ec, size_t) {
      if (ended_) return;
      if (ec) return FailIo("cannot send to", ec);
      parser_.emplace();
      parser_->header_limit(kMaxHeaderBytes);
      parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
      stream_.expires_after(Timeout());
      http::async_read_header(stream_, buffer_, *parser_, [this](beast::error_code read_ec, size_t) {
        if (ended_) return;
        if (read_ec) return FailIo("no answer from", read_ec);
        status_ = static_cast<int>(parser_->get().result_int());
        if (callbacks_.on_status) callbacks_.on_status(status_);
        if (parser_->is_done()) return End();
        ReadSome();
      });
    });
  }

  void ReadSome() {
    parser_->get().body().data = chunk_;
    parser_->get().body().size = sizeof(chunk_);
    stream_.expires_after(Timeout());
    http::async_read_some(stream_, buffer_, *parser_, [this](beast::error_code ec, size_t) {
      if (ended_) return;
      if (ec == http::error::need_buffer) ec = {};
      if (ec) return FailIo("the answer broke off from", ec);
      const size_t received = sizeof(chunk_) - parser_->get().body().size;
      if (received > 0 && callbacks_.on_body) callbacks_.on_body(absl::string_view(chunk_, received));
      if (ended_) return;  // the callback may not cancel, but stay safe if it ever does
      if (parser_->is_done()) return End();
      ReadSome();
    });
  }

  std::chrono::steady_clock::duration Timeout() const {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        absl::ToChronoNanoseconds(request_.idle_timeout));
  }

  void FailIo(absl::string_view what, beast::error_code ec) {
    if (ec == beast::error::timeout) {
      return Fail(absl::DeadlineExceededError(
          absl::StrCat(Server(), " stayed silent for ", absl::FormatDuration(request_.idle_timeout))));
    }
    Fail(absl::UnavailableError(absl::StrCat(what, " ", Server(), ": ", ec.message())));
  }

  void Fail(absl::Status status) {
    failure_ = std::move(status);
    End();
  }

  // Closes everything; the operations still pending complete with an error that their handlers ignore.
  void End() {
    if (ended_) return;
    ended_ = true;
    resolver_.cancel();
    stream_.close();
    beast::error_code ignored;
    cancel_watch_.cancel(ignored);
  }

  const bench::ServerUrl& url_;
  const HttpExchangeRequest& request_;
  const HttpExchangeCallbacks& callbacks_;
  net::io_context io_;
  tcp::resolver resolver_;
  beast::tcp_stream stream_;
  net::posix::stream_descriptor cancel_watch_;
  http::request<http::string_body> message_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  char chunk_[16 << 10];
  bool ended_ = false;
  bool cancelled_ = false;
  absl::Status failure_;
  int status_ = 0;
};

}  // namespace

absl::StatusOr<int> ExchangeHttp(const bench::ServerUrl& url, const HttpExchangeRequest& request,
                                 const HttpExchangeCallbacks& callbacks) {
  return Exchange(url, request, callbacks).Run();
}

absl::StatusOr<HttpAnswer> FetchHttp(const bench::ServerUrl& url, const HttpExchangeRequest& request) {
  HttpAnswer answer;
  HttpExchangeCallbacks callbacks;
  callbacks.on_body = [&answer](absl::string_view bytes) {
    if (answer.body.size() < kMaxCollectedBodyBytes) {
      absl::StrAppend(&answer.body, bytes.substr(0, kMaxCollectedBodyBytes - answer.body.size()));
    }
  };
  auto status = ExchangeHttp(url, request, callbacks);
  if (!status.ok()) return status.status();
  answer.status = *status;
  return answer;
}

}  // namespace llmc::chat
