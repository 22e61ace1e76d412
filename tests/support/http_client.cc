#include "tests/support/http_client.h"

#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"

namespace llmc::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using Parser = http::response_parser<http::string_body>;

std::string RawRequest(const std::string& method, const std::string& target, const std::string& body,
                       const HttpHeaderList& headers, bool close) {
  std::string request = absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&request, name, ": ", value, "\r\n");
  if (method != "GET" || !body.empty()) absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n");
  if (close) absl::StrAppend(&request, "Connection: close\r\n");
  absl::StrAppend(&request, "\r\n", body);
  return request;
}

std::map<std::string, std::string> HeadersOf(const Parser& parser) {
  std::map<std::string, std::string> headers;
  for (const auto& field : parser.get()) {
    headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
  }
  return headers;
}

std::string Lookup(const std::map<std::string, std::string>& headers, const std::string& name) {
  auto it = headers.find(absl::AsciiStrToLower(name));
  return it == headers.end() ? std::string() : it->second;
}

bool HasHeader(const HttpHeaderList& headers, const std::string& name) {
  for (const auto& header : headers) {
    if (absl::AsciiStrToLower(header.first) == absl::AsciiStrToLower(name)) return true;
  }
  return false;
}

}  // namespace

namespace internal {

// One connection driven by async operations on a private io_context, each run with a deadline (Beast's
// timeouts only apply to asynchronous operations).
struct HttpConnection {
  asio::io_context io;
  beast::tcp_stream stream{io};
  beast::flat_buffer buffer;
  Parser parser;

  HttpConnection() { parser.body_limit(std::numeric_limits<uint64_t>::max()); }

  template <typename Op>
  error_code Run(absl::Duration timeout, Op op) {
    if (timeout < absl::ZeroDuration()) timeout = absl::ZeroDuration();
    error_code result = asio::error::would_block;
    stream.expires_after(absl::ToChronoNanoseconds(timeout));
    io.restart();
    op([&result](error_code error, size_t = 0) { result = error; });
    io.run();
    return result;
  }

  error_code Connect(int port, absl::Duration timeout) {
    const asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port));
    return Run(timeout, [&](auto done) { stream.async_connect(endpoint, [done](error_code e) mutable { done(e); }); });
  }

  error_code Write(const std::string& bytes, absl::Duration timeout) {
    return Run(timeout, [&](auto done) {
      asio::async_write(stream, asio::buffer(bytes), [done](error_code e, size_t) mutable { done(e); });
    });
  }

  error_code ReadHeader(absl::Duration timeout) {
    return Run(timeout, [&](auto done) {
      http::async_read_header(stream, buffer, parser, [done](error_code e, size_t) mutable { done(e); });
    });
  }

  error_code ReadSome(absl::Duration timeout) {
    return Run(timeout, [&](auto done) {
      http::async_read_some(stream, buffer, parser, [done](error_code e, size_t) mutable { done(e); });
    });
  }

  error_code ReadAll(absl::Duration timeout) {
    return Run(timeout, [&](auto done) {
      http::async_read(stream, buffer, parser, [done](error_code e, size_t) mutable { done(e); });
    });
  }

  void Close() {
    error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
  }
};

}  // namespace internal

std::string HttpReply::Header(const std::string& name) const { return Lookup(headers, name); }

HttpReply HttpCall(int port, const std::string& method, const std::string& target, const std::string& body,
                   const HttpHeaderList& headers, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  HttpReply reply;
  auto connection = std::make_unique<internal::HttpConnection>();
  if (error_code error = connection->Connect(port, timeout)) {
    reply.error = "connect: " + error.message();
    return reply;
  }
  // A server may answer (413, say) and close before taking the whole body: read the answer regardless.
  const error_code write_error =
      connection->Write(RawRequest(method, target, body, headers, /*close=*/true), deadline - absl::Now());
  if (error_code error = connection->ReadAll(deadline - absl::Now())) {
    reply.error = absl::StrCat("read: ", error.message(), write_error ? " (write: " + write_error.message() + ")" : "");
    return reply;
  }
  reply.status = static_cast<int>(connection->parser.get().result_int());
  reply.headers = HeadersOf(connection->parser);
  reply.body = connection->parser.get().body();
  connection->Close();
  return reply;
}

HttpReply PostJson(int port, const std::string& target, const std::string& body, const HttpHeaderList& headers,
                   absl::Duration timeout) {
  HttpHeaderList all = headers;
  if (!HasHeader(all, "Content-Type")) all.emplace_back("Content-Type", "application/json");
  return HttpCall(port, "POST", target, body, all, timeout);
}

SseClient::SseClient(int port, const std::string& target, const std::string& body, const HttpHeaderList& headers,
                     absl::Duration timeout)
    : connection_(std::make_unique<internal::HttpConnection>()) {
  const absl::Time deadline = absl::Now() + timeout;
  HttpHeaderList all = headers;
  if (!HasHeader(all, "Content-Type")) all.emplace_back("Content-Type", "application/json");
  all.emplace_back("Accept", "text/event-stream");
  if (error_code error = connection_->Connect(port, timeout)) {
    error_ = "connect: " + error.message();
    failed_ = true;
    return;
  }
  if (error_code error = connection_->Write(RawRequest("POST", target, body, all, false), deadline - absl::Now())) {
    error_ = "write: " + error.message();
    failed_ = true;
    return;
  }
  if (error_code error = connection_->ReadHeader(deadline - absl::Now())) {
    error_ = "read header: " + error.message();
    failed_ = true;
    return;
  }
  status_ = static_cast<int>(connection_->parser.get().result_int());
  headers_ = HeadersOf(connection_->parser);
}

SseClient::~SseClient() { Close(); }

std::string SseClient::Header(const std::string& name) const { return Lookup(headers_, name); }

bool SseClient::complete() const { return connection_->parser.is_done(); }

bool SseClient::ReadMore(absl::Time deadline) {
  if (failed_ || status_ == 0 || complete()) return false;
  const error_code error = connection_->ReadSome(deadline - absl::Now());
  std::string& body = connection_->parser.get().body();
  raw_ += body;
  body.clear();
  if (error) {
    error_ = "read: " + error.message();
    failed_ = true;
    return false;
  }
  return true;
}

std::optional<std::string> SseClient::NextEvent(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t end = raw_.find("\n\n", consumed_);
    if (end != std::string::npos) {
      const std::string block = raw_.substr(consumed_, end - consumed_);
      consumed_ = end + 2;
      std::optional<std::string> data;
      std::string name;
      size_t start = 0;
      while (start <= block.size()) {
        size_t line_end = block.find('\n', start);
        if (line_end == std::string::npos) line_end = block.size();
        const std::string line = block.substr(start, line_end - start);
        start = line_end + 1;
        if (line.rfind(":", 0) == 0) {
          ++comments_;
        } else if (line.rfind("data: ", 0) == 0) {
          data = data.has_value() ? *data + "\n" + line.substr(6) : line.substr(6);
        } else if (line.rfind("event: ", 0) == 0 && name.empty()) {
          name = line.substr(7);
        } else {
          framing_errors_.push_back(line);
        }
      }
      if (data.has_value()) {
        event_names_.push_back(std::move(name));
        return data;
      }
      if (!name.empty()) framing_errors_.push_back("event without data: " + name);
      continue;  // a comment-only block
    }
    if (absl::Now() >= deadline || !ReadMore(deadline)) {
      // One last look: the final read may have completed a block.
      if (raw_.find("\n\n", consumed_) != std::string::npos) continue;
      if (consumed_ < raw_.size() && complete()) framing_errors_.push_back("trailing: " + raw_.substr(consumed_));
      return std::nullopt;
    }
  }
}

std::vector<std::string> SseClient::ReadAll(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> events;
  while (auto event = NextEvent(deadline - absl::Now())) events.push_back(std::move(*event));
  return events;
}

std::string SseClient::ReadBody(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (ReadMore(deadline)) {
  }
  return raw_;
}

void SseClient::Close() {
  if (connection_ != nullptr) connection_->Close();
}

}  // namespace llmc::testing
