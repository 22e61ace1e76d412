#include "tests/gateway/http_test_client.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/read.hpp"

namespace llmc::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

std::string RawRequest(const std::string& method, const std::string& target,
                       const std::vector<std::pair<std::string, std::string>>& headers,
                       std::optional<std::string> body) {
  std::string request = absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&request, name, ": ", value, "\r\n");
  if (body) absl::StrAppend(&request, "Content-Length: ", body->size(), "\r\n");
  absl::StrAppend(&request, "\r\n", body.value_or(""));
  return request;
}

HttpTestClient::HttpTestClient(uint16_t port, absl::Duration timeout) : stream_(io_), timeout_(timeout) {
  const asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
  const error_code error =
      Run([&](auto done) { stream_.async_connect(endpoint, [done](error_code e) mutable { done(e); }); }, timeout_);
  connected_ = !error;
}

template <typename Op>
error_code HttpTestClient::Run(Op op, absl::Duration timeout) {
  error_code result = asio::error::would_block;
  stream_.expires_after(absl::ToChronoNanoseconds(timeout));
  io_.restart();
  op([&result](error_code error) { result = error; });
  io_.run();
  return result;
}

bool HttpTestClient::Write(const std::string& bytes) {
  return !Run(
      [&](auto done) {
        asio::async_write(stream_, asio::buffer(bytes), [done](error_code e, size_t) mutable { done(e); });
      },
      timeout_);
}

std::optional<TestResponse> HttpTestClient::Read() {
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  const error_code error = Run(
      [&](auto done) { http::async_read(stream_, buffer_, parser, [done](error_code e, size_t) mutable { done(e); }); },
      timeout_);
  if (error) return std::nullopt;
  return parser.release();
}

std::optional<TestResponse> HttpTestClient::RoundTrip(const std::string& request) {
  if (!Write(request)) return std::nullopt;
  return Read();
}

bool HttpTestClient::StartStream() {
  stream_parser_.emplace();
  chunks_.clear();
  on_chunk_header_ = [this](uint64_t size, beast::string_view, error_code&) {
    if (size > 0) chunks_.emplace_back();
  };
  on_chunk_body_ = [this](uint64_t, beast::string_view body, error_code&) {
    chunks_.back().append(body.data(), body.size());
    return body.size();
  };
  stream_parser_->on_chunk_header(on_chunk_header_);
  stream_parser_->on_chunk_body(on_chunk_body_);
  const error_code error = Run(
      [&](auto done) {
        http::async_read_header(stream_, buffer_, *stream_parser_, [done](error_code e, size_t) mutable { done(e); });
      },
      timeout_);
  return !error;
}

bool HttpTestClient::ReadChunks(const std::function<bool(const std::vector<std::string>&)>& done) {
  const absl::Time deadline = absl::Now() + timeout_;
  while (!done(chunks_) && !stream_parser_->is_done()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    const error_code error = Run(
        [&](auto finish) {
          http::async_read_some(stream_, buffer_, *stream_parser_,
                                [finish](error_code e, size_t) mutable { finish(e); });
        },
        left);
    if (error) return false;
  }
  return done(chunks_);
}

bool HttpTestClient::PeerCloses(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  char scratch[4096];
  while (absl::Now() < deadline) {
    const error_code error = Run(
        [&](auto done) {
          stream_.async_read_some(asio::buffer(scratch), [done](error_code e, size_t) mutable { done(e); });
        },
        deadline - absl::Now());
    if (error == asio::error::eof || error == asio::error::connection_reset) return true;
    if (error) return false;  // timed out
  }
  return false;
}

void HttpTestClient::CloseSend() {
  error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
}

void HttpTestClient::Close() {
  error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace llmc::testing
