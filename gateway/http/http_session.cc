#include "gateway/http/http_session.h"

#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/status.hpp"
#include "common/logging.h"
#include "gateway/http/error_body.h"
#include "gateway/http/http_session_writer.h"
#include "gateway/http/sse_format.h"

namespace llmc::gateway {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

constexpr size_t kReadChunk = 4096;
// Bytes a client may send ahead (pipelining) while its previous request is handled; past this the
// session stops reading until the response ends.
constexpr size_t kMaxReadAhead = 64 * 1024;
// With the read-ahead full, how often a handled request's connection is checked for a hang-up.
constexpr auto kHangUpPoll = std::chrono::milliseconds(500);
// After an error response: how long, and how much, to keep reading before closing, so the client sees
// the response rather than a reset.
constexpr auto kLingerTime = absl::Seconds(2);
constexpr uint64_t kMaxLingerBytes = 1 << 20;
constexpr absl::string_view kInvalidRequest = "invalid_request_error";

std::chrono::steady_clock::duration ToSteady(absl::Duration duration) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(absl::ToChronoNanoseconds(duration));
}

std::string NewRequestId() {
  thread_local std::mt19937_64 random(std::random_device{}());
  const uint64_t high = random();
  const uint64_t low = random();
  return absl::StrFormat("%016x%016x", high, low);
}

// A client-supplied X-Request-Id is kept when it is short and plain enough to put in logs as is.
bool SaneRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':';
  });
}

bool SafeHeader(const std::pair<std::string, std::string>& header) {
  const auto bad = [](char c) { return c == '\r' || c == '\n' || c == '\0'; };
  return !header.first.empty() && std::none_of(header.first.begin(), header.first.end(), bad) &&
         std::none_of(header.second.begin(), header.second.end(), bad);
}

absl::string_view View(beast::string_view text) { return absl::string_view(text.data(), text.size()); }

bool IsParseError(const error_code& error) {
  return &error.category() == &http::make_error_code(http::error::bad_target).category();
}

}  // namespace

HttpSession::HttpSession(asio::ip::tcp::socket socket, std::shared_ptr<HttpServerState> state)
    : state_(std::move(state)),
      options_(state_->options()),
      strand_(socket.get_executor()),
      socket_(std::move(socket)),
      deadline_(strand_),
      write_timer_(strand_),
      keepalive_timer_(strand_),
      hang_up_timer_(strand_),
      outputs_(state_->observer()) {
  if (state_->observer() != nullptr) state_->observer()->OnConnectionOpened();
}

HttpSession::~HttpSession() {
  state_->RemoveSession(this);
  UncountRequest();
  ReleaseBody();
  if (!counted_closed_) {
    state_->ConnectionClosed();
    if (state_->observer() != nullptr) state_->observer()->OnConnectionClosed();
  }
}

void HttpSession::Start() {
  asio::post(strand_, [self = shared_from_this()] {
    if (!self->state_->AddSession(self.get(), self)) {
      self->CloseSocket();
      return;
    }
    self->WaitForRequest();
  });
}

void HttpSession::Close() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->phase_ == Phase::kHandling && !self->exchange_.ended) {
      self->ClientGone();
    } else {
      self->CloseSocket();
    }
  });
}

void HttpSession::CloseWhenIdle() {
  asio::post(strand_, [self = shared_from_this()] {
    // A connection that has not brought its first request yet may be sending it now: it is served.
    const bool idle = self->phase_ == Phase::kIdle && self->exchange_count_ > 0 && self->buffer_.size() == 0;
    if (idle) return self->CloseSocket();
    self->exchange_.keep_alive = false;
  });
}

// ---- Reading ---------------------------------------------------------------------------------------------

void HttpSession::WaitForRequest() {
  phase_ = Phase::kIdle;
  ArmDeadline(options_.idle_timeout);
  if (buffer_.size() == 0) {
    if (!read_pending_) ReadSome();
  } else if (read_pending_) {
    // The client sent the next request while this one was answered: stop the watching read, whose
    // completion (aborted) starts parsing what is buffered. No write is in flight here.
    error_code ignored;
    socket_.cancel(ignored);
  } else {
    BeginRead();
  }
}

void HttpSession::ReadSome() {
  read_pending_ = true;
  socket_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](error_code error, size_t bytes) {
    self->OnReadSome(error, bytes);
  });
}

void HttpSession::OnReadSome(error_code error, size_t bytes) {
  read_pending_ = false;
  if (!error) buffer_.commit(bytes);
  switch (phase_) {
    case Phase::kIdle:
      if (error && error != asio::error::operation_aborted) {
        CloseSocket();  // the client closed (or broke) an idle keep-alive connection
      } else if (buffer_.size() > 0) {
        BeginRead();
      } else {
        ReadSome();
      }
      return;
    case Phase::kHandling:
      if (error == asio::error::eof && exchange_.ended) {
        // The client half-closed after its request, and the whole answer is queued: send it, then close.
        exchange_.keep_alive = false;
      } else if (error && error != asio::error::operation_aborted) {
        ClientGone();
      } else if (!error && buffer_.size() < kMaxReadAhead) {
        ReadSome();
      } else if (!error) {
        WatchForHangUp();
      }
      return;
    case Phase::kDraining:
      drained_bytes_ += buffer_.size();
      buffer_.consume(buffer_.size());
      if (error || drained_bytes_ > kMaxLingerBytes) {
        CloseSocket();
      } else {
        ReadSome();
      }
      return;
    case Phase::kReading:
    case Phase::kClosed:
      return;
  }
}

void HttpSession::BeginRead() {
  phase_ = Phase::kReading;
  CountRequest();
  parser_.emplace();
  parser_->header_limit(options_.max_header_bytes);
  parser_->body_limit(options_.max_body_bytes);
  // A request usually arrives whole in one read: parse it here rather than through the asynchronous read
  // operations, whose completions each take another turn of the I/O loop.
  error_code error;
  ParseBuffered(error);
  if (error != http::error::need_more) {
    if (error) return OnReadError(error);
    if (parser_->is_done()) return OnRequest();
  }
  ArmDeadline(options_.read_timeout);
  if (parser_->is_header_done()) return OnHeader({});
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code error, size_t) { self->OnHeader(error); });
}

void HttpSession::ParseBuffered(error_code& error) {
  parser_->eager(true);
  while (!parser_->is_done()) {
    const size_t used = parser_->put(buffer_.data(), error);
    buffer_.consume(used);
    if (error || used == 0) return;
  }
}

void HttpSession::OnHeader(error_code error) {
  if (phase_ == Phase::kClosed) return;
  if (error) return OnReadError(error);
  if (parser_->is_done()) return OnRequest();
  if (RejectAtHeader()) return;
  const auto expect = parser_->get()[http::field::expect];
  if (!absl::EqualsIgnoreCase(View(expect), "100-continue")) return ReadBody();
  // Clients such as curl wait for this before sending a large body; it goes out only once the header
  // passed the checks above, so a refused client never sends its body.
  static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  asio::async_write(socket_, asio::buffer(kContinue), [self = shared_from_this()](error_code write_error, size_t) {
    if (self->phase_ == Phase::kClosed) return;
    if (write_error) return self->CloseSocket();
    self->ReadBody();
  });
}

bool HttpSession::RejectAtHeader() {
  const HttpRouter& router = state_->router();
  const auto& header = parser_->get();
  const absl::string_view method = View(header.method_string());
  const HttpRouter::Lookup lookup = router.Find(method, View(header.target()));
  const bool preflight = method == "OPTIONS" && lookup.match == HttpRouter::Match::kMethodNotAllowed;
  const bool route_error =
      !preflight && (lookup.match != HttpRouter::Match::kFound ||
                     (lookup.route->requires_auth && !router.Authorized(View(header[http::field::authorization]))));
  if (!route_error) {
    // A chunked body does not say its size: it may take up to the limit.
    const auto declared = parser_->content_length();
    const uint64_t bytes = declared ? std::min<uint64_t>(*declared, options_.max_body_bytes) : options_.max_body_bytes;
    if (state_->TryReserveBody(bytes)) {
      reserved_body_bytes_ = bytes;
      return false;
    }
  }
  // Answered from the header alone; what the client sends next is drained, never buffered.
  DisarmDeadline();
  const HttpRequest request = parser_->release();
  parser_.reset();
  buffer_.consume(buffer_.size());
  BeginExchange(View(request.method_string()), View(request.target()), View(request["X-Request-Id"]),
                View(request[http::field::origin]), /*keep_alive=*/false, request.version());
  if (route_error) {
    AnswerRouteError(lookup, View(request.method_string()), View(request.target()),
                     View(request[http::field::authorization]));
    return true;
  }
  exchange_.route = lookup.route_path;
  SendError(503,
            absl::StrCat("the gateway is receiving ", options_.max_inflight_body_bytes,
                         " bytes of request bodies at once, its limit; retry later"),
            "service_unavailable_error", "too_many_request_bodies",
            {{"Retry-After", absl::StrCat(options_.retry_after_seconds)}});
  return true;
}

void HttpSession::ReleaseBody() {
  if (reserved_body_bytes_ == 0) return;
  state_->ReleaseBody(reserved_body_bytes_);
  reserved_body_bytes_ = 0;
}

void HttpSession::ReadBody() {
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](error_code error, size_t) { self->OnBody(error); });
}

void HttpSession::OnBody(error_code error) {
  if (phase_ == Phase::kClosed) return;
  if (error) return OnReadError(error);
  OnRequest();
}

void HttpSession::OnReadError(error_code error) {
  DisarmDeadline();
  ReleaseBody();
  if (timed_out_) {
    BeginExchange("-", "-", "", "", false, 11);
    return SendError(408, "the request was not received in time", kInvalidRequest, "request_timeout");
  }
  if (error == http::error::end_of_stream || error == http::error::partial_message || !IsParseError(error)) {
    return CloseSocket();  // the client went away mid-request
  }
  // A declared length over the limit fails as the header ends, its fields all read.
  const bool have_header = parser_->is_header_done() || error == http::error::body_limit;
  const auto& partial = parser_->get();
  BeginExchange(have_header ? std::string(partial.method_string()) : "-",
                have_header ? std::string(partial.target()) : "-", have_header ? View(partial["X-Request-Id"]) : "",
                have_header ? View(partial[http::field::origin]) : "", false, 11);
  if (error == http::error::body_limit) {
    // An unknown route or a missing key is told as such, whatever the body's size.
    const absl::string_view method = View(partial.method_string());
    const HttpRouter::Lookup lookup = state_->router().Find(method, View(partial.target()));
    if (lookup.match != HttpRouter::Match::kNotFound) exchange_.route = lookup.route_path;
    if (!(method == "OPTIONS" && lookup.match == HttpRouter::Match::kMethodNotAllowed) &&
        AnswerRouteError(lookup, method, View(partial.target()), View(partial[http::field::authorization]))) {
      return;
    }
    return SendError(413, absl::StrCat("request body is larger than the limit of ", options_.max_body_bytes, " bytes"),
                     kInvalidRequest, "request_too_large");
  }
  if (error == http::error::header_limit) {
    return SendError(431,
                     absl::StrCat("request header is larger than the limit of ", options_.max_header_bytes, " bytes"),
                     kInvalidRequest, "request_header_fields_too_large");
  }
  SendError(400, absl::StrCat("malformed HTTP request: ", error.message()), kInvalidRequest, "bad_request");
}

void HttpSession::OnRequest() {
  DisarmDeadline();
  ReleaseBody();  // the body is read: the budget is for bodies still arriving
  const HttpRequest request = parser_->release();
  parser_.reset();
  BeginExchange(View(request.method_string()), View(request.target()), View(request["X-Request-Id"]),
                View(request[http::field::origin]), request.keep_alive(), request.version());
  Dispatch(request);
}

void HttpSession::Dispatch(const HttpRequest& request) {
  const HttpRouter& router = state_->router();
  const absl::string_view method = View(request.method_string());
  const absl::string_view target = View(request.target());
  const HttpRouter::Lookup lookup = router.Find(method, target);
  if (lookup.match != HttpRouter::Match::kNotFound) exchange_.route = lookup.route_path;

  if (method == "OPTIONS" && lookup.match == HttpRouter::Match::kMethodNotAllowed) {
    // A CORS preflight (or a plain OPTIONS): no authentication, since browsers send none with it.
    const std::string methods = absl::StrCat(lookup.allow, ", OPTIONS");
    HttpHeaders headers = {{"Allow", methods}};
    if (!exchange_.allowed_origin.empty()) {
      headers.emplace_back("Access-Control-Allow-Methods", methods);
      headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id");
      headers.emplace_back("Access-Control-Max-Age", "86400");
    }
    return ApplySend(exchange_.id, 204, "", "", std::move(headers));
  }
  if (AnswerRouteError(lookup, method, target, View(request[http::field::authorization]))) return;

  auto writer =
      std::make_shared<Writer>(weak_from_this(), state_, exchange_.id, exchange_.request_id, exchange_.gone_flag);
  ScopedLogContext log_context("request_id", exchange_.request_id);
  try {
    lookup.route->handler(request, std::move(writer));
  } catch (const std::exception& e) {
    LLMC_LOG(Error) << "handler for " << exchange_.route << " threw: " << e.what();
    if (!exchange_.response_started) {
      SendError(500, "internal error while handling the request", "server_error", "internal_error");
    } else {
      ClientGone();
    }
  }
}

bool HttpSession::AnswerRouteError(const HttpRouter::Lookup& lookup, absl::string_view method, absl::string_view target,
                                   absl::string_view authorization) {
  if (lookup.match != HttpRouter::Match::kNotFound) exchange_.route = lookup.route_path;
  if (lookup.match == HttpRouter::Match::kNotFound) {
    SendError(404, absl::StrCat("Unknown request URL: ", method, " ", HttpRouter::PathOf(target)), kInvalidRequest,
              "not_found");
    return true;
  }
  if (lookup.match == HttpRouter::Match::kMethodNotAllowed) {
    SendError(
        405, absl::StrCat("Method ", method, " is not allowed for ", exchange_.route, " (allowed: ", lookup.allow, ")"),
        kInvalidRequest, "method_not_allowed", {{"Allow", lookup.allow}});
    return true;
  }
  if (lookup.route->requires_auth && !state_->router().Authorized(authorization)) {
    const bool presented = !authorization.empty();
    SendError(401,
              presented ? "Incorrect API key provided."
                        : "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
              "authentication_error", "invalid_api_key", {{"WWW-Authenticate", "Bearer"}});
    return true;
  }
  return false;
}

// ---- The exchange ----------------------------------------------------------------------------------------

void HttpSession::BeginExchange(absl::string_view method, absl::string_view target, absl::string_view request_id,
                                absl::string_view origin, bool keep_alive, unsigned version) {
  exchange_ = Exchange();
  exchange_.id = ++exchange_count_;
  exchange_.method = std::string(method);
  exchange_.path = std::string(HttpRouter::PathOf(target).substr(0, 256));  // queries may hold secrets
  exchange_.request_id = SaneRequestId(request_id) ? std::string(request_id) : NewRequestId();
  if (state_->router().cors_enabled()) exchange_.allowed_origin = state_->router().AllowedOrigin(origin);
  exchange_.started = std::chrono::steady_clock::now();
  exchange_.gone_flag = std::make_shared<std::atomic<bool>>(false);
  exchange_.keep_alive = keep_alive && !state_->draining();
  exchange_.chunked = version >= 11;
  phase_ = Phase::kHandling;
  CountRequest();
  self_ = shared_from_this();
  if (read_pending_) return;
  if (buffer_.size() < kMaxReadAhead) {
    ReadSome();
  } else {
    WatchForHangUp();
  }
}

void HttpSession::WatchForHangUp() {
  hang_up_timer_.expires_after(kHangUpPoll);
  hang_up_timer_.async_wait([self = shared_from_this(), exchange = exchange_.id](error_code error) {
    if (error || !self->Accepts(exchange)) return;
    // POLLRDHUP tells that the client shut its side even while unread bytes wait in front of the FIN.
    pollfd watched{self->socket_.native_handle(), POLLRDHUP, 0};
    if (::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      return self->ClientGone();
    }
    self->WatchForHangUp();
  });
}

void HttpSession::SendError(int status, absl::string_view message, absl::string_view type, absl::string_view code,
                            HttpHeaders extra_headers) {
  ApplySend(exchange_.id, status, "application/json", OpenAiErrorBody(message, type, code), std::move(extra_headers));
}

std::string HttpSession::ResponseHead(int status, const HttpHeaders& headers) const {
  absl::string_view reason = View(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status))));
  if (absl::StartsWith(reason, "<")) reason = "Unknown";
  std::string head = absl::StrCat("HTTP/1.1 ", status, " ", reason,
                                  "\r\nServer: llmc\r\nX-Request-Id: ", exchange_.request_id, "\r\n");
  if (!exchange_.allowed_origin.empty()) {
    absl::StrAppend(&head, "Access-Control-Allow-Origin: ", exchange_.allowed_origin,
                    "\r\nAccess-Control-Expose-Headers: X-Request-Id\r\n");
    if (exchange_.allowed_origin != "*") absl::StrAppend(&head, "Vary: Origin\r\n");
  }
  for (const auto& header : headers) {
    if (SafeHeader(header)) absl::StrAppend(&head, header.first, ": ", header.second, "\r\n");
  }
  return head;
}

void HttpSession::FinishExchange() {
  LogExchange();
  UncountRequest();
  self_.reset();
  if (exchange_.keep_alive) {
    WaitForRequest();
  } else {
    StartDrain();
  }
}

void HttpSession::ClientGone() {
  if (phase_ != Phase::kHandling) return CloseSocket();
  std::function<void()> callback;
  if (!exchange_.ended) {
    exchange_.gone = true;
    exchange_.gone_flag->store(true);
    exchange_.status = 499;
    callback = std::move(exchange_.on_gone);
    exchange_.on_gone = nullptr;
  }
  LogExchange();
  CloseSocket();
  if (callback) callback();
}

void HttpSession::LogExchange() {
  if (exchange_.logged) return;
  exchange_.logged = true;
  const absl::Duration duration = absl::FromChrono(std::chrono::steady_clock::now() - exchange_.started);
  LLMC_LOG(Info)
          .With("request_id", exchange_.request_id)
          .With("method", exchange_.method)
          .With("path", exchange_.path)
          .With("status", absl::StrCat(exchange_.status))
          .With("duration_ms", absl::StrFormat("%.1f", absl::ToDoubleMilliseconds(duration)))
      << "http request";
  if (HttpObserver* observer = state_->observer()) {
    const HttpRouter& router = state_->router();
    observer->OnRequestDone(router.KnowsMethod(exchange_.method) ? exchange_.method : "OTHER", exchange_.route,
                            exchange_.status, duration);
  }
}

// ---- What the writer applies -----------------------------------------------------------------------------

bool HttpSession::Accepts(uint64_t exchange) const {
  return exchange == exchange_.id && phase_ == Phase::kHandling && !exchange_.ended && !exchange_.gone;
}

void HttpSession::ApplySend(uint64_t exchange, int status, std::string content_type, std::string body,
                            HttpHeaders headers) {
  if (!Accepts(exchange) || exchange_.response_started) return;
  if (status < 100 || status > 999) status = 500;
  exchange_.response_started = true;
  exchange_.ended = true;
  exchange_.status = status;
  exchange_.on_gone = nullptr;
  std::string bytes = ResponseHead(status, headers);
  const bool bodyless = status == 204 || status == 304 || status < 200;
  if (!content_type.empty() && !bodyless) absl::StrAppend(&bytes, "Content-Type: ", content_type, "\r\n");
  if (!bodyless) absl::StrAppend(&bytes, "Content-Length: ", body.size(), "\r\n");
  absl::StrAppend(&bytes, "Connection: ", exchange_.keep_alive ? "keep-alive" : "close", "\r\n\r\n");
  if (!bodyless) bytes += body;
  Enqueue(std::move(bytes), /*ends_response=*/true);
}

void HttpSession::ApplyStartEventStream(uint64_t exchange, HttpHeaders headers) {
  if (!Accepts(exchange) || exchange_.response_started) return;
  exchange_.response_started = true;
  exchange_.streaming = true;
  exchange_.status = 200;
  if (!exchange_.chunked) exchange_.keep_alive = false;  // HTTP/1.0: the end of the stream is the close
  std::string bytes = ResponseHead(200, headers);
  absl::StrAppend(&bytes,
                  "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"
                  "Connection: ",
                  exchange_.keep_alive ? "keep-alive" : "close", "\r\n",
                  exchange_.chunked ? "Transfer-Encoding: chunked\r\n" : "", "\r\n");
  Enqueue(std::move(bytes), false);
  exchange_.last_write = std::chrono::steady_clock::now();
  ArmKeepalive();
}

void HttpSession::ApplyWriteEvent(uint64_t exchange, const SseEvent& sse) {
  if (!Accepts(exchange) || !exchange_.streaming) return;
  std::string event = FormatSseEvent(sse.data, sse.name);
  Enqueue(exchange_.chunked ? ChunkOf(event) : std::move(event), false);
  exchange_.last_write = std::chrono::steady_clock::now();
}

void HttpSession::ApplyEndEventStream(uint64_t exchange) {
  if (!Accepts(exchange) || !exchange_.streaming) return;
  exchange_.ended = true;
  exchange_.on_gone = nullptr;
  keepalive_timer_.cancel();
  Enqueue(exchange_.chunked ? std::string(kLastChunk) : std::string(), /*ends_response=*/true);
}

void HttpSession::ApplyOnClientGone(uint64_t exchange, std::function<void()> callback) {
  if (exchange != exchange_.id || exchange_.ended) return;
  if (exchange_.gone) {
    callback();  // the client left before the handler asked
  } else {
    exchange_.on_gone = std::move(callback);
  }
}

void HttpSession::ApplyWhenDrained(uint64_t exchange, std::function<void()> callback) {
  // The producer asks once it has handed over its output: send that before the producer goes on (for a
  // stream, before its next gRPC read starts), so the client is not kept waiting behind it.
  if (phase_ != Phase::kClosed && !outputs_.writing() && !outputs_.empty()) WriteNext();
  if (!Accepts(exchange)) return callback();
  outputs_.WhenDrained(std::move(callback));
}

// ---- Writing ---------------------------------------------------------------------------------------------

void HttpSession::Enqueue(std::string bytes, bool ends_response) {
  if (phase_ == Phase::kClosed) return;
  outputs_.Push(std::move(bytes), ends_response);
  if (outputs_.writing() || flush_posted_) return;
  // The write starts after the handlers already waiting on the strand, so what they add leaves with it: a
  // first token brings the stream's head and two events, which reach the client in one segment.
  flush_posted_ = true;
  asio::post(strand_, [self = shared_from_this()] {
    self->flush_posted_ = false;
    if (self->phase_ != Phase::kClosed && !self->outputs_.writing() && !self->outputs_.empty()) self->WriteNext();
  });
}

void HttpSession::WriteNext() {
  const std::vector<asio::const_buffer>& buffers = outputs_.StartWrite();
  const uint64_t generation = ++write_generation_;
  write_timer_.expires_after(ToSteady(options_.write_timeout));
  write_timer_.async_wait([self = shared_from_this(), generation](error_code error) {
    if (error || generation != self->write_generation_ || !self->outputs_.writing()) return;
    self->ClientGone();  // the client stopped reading
  });
  asio::async_write(socket_, buffers, [self = shared_from_this()](error_code error, size_t) { self->OnWrite(error); });
}

void HttpSession::OnWrite(error_code error) {
  write_timer_.cancel();
  if (phase_ == Phase::kClosed) return outputs_.Clear();
  if (error) {
    outputs_.Clear();  // none of it will reach the client
    return ClientGone();
  }
  const bool ends_response = outputs_.FinishWrite();  // which may run the drained callback
  if (!outputs_.empty()) return WriteNext();
  if (ends_response && phase_ == Phase::kHandling) FinishExchange();
}

// ---- Timers ----------------------------------------------------------------------------------------------

void HttpSession::ArmDeadline(absl::Duration timeout) {
  const uint64_t generation = ++deadline_generation_;
  timed_out_ = false;
  deadline_.expires_after(ToSteady(timeout));
  deadline_.async_wait([self = shared_from_this(), generation](error_code error) {
    if (!error && generation == self->deadline_generation_) self->OnDeadline();
  });
}

void HttpSession::DisarmDeadline() {
  ++deadline_generation_;
  deadline_.cancel();
}

void HttpSession::OnDeadline() {
  switch (phase_) {
    case Phase::kIdle:
    case Phase::kDraining:
      return CloseSocket();
    case Phase::kReading: {
      // Cancelling fails the pending read, whose handler answers 408.
      timed_out_ = true;
      error_code ignored;
      socket_.cancel(ignored);
      return;
    }
    case Phase::kHandling:
    case Phase::kClosed:
      return;
  }
}

void HttpSession::ArmKeepalive() {
  keepalive_timer_.expires_at(exchange_.last_write + ToSteady(options_.sse_keepalive_interval));
  keepalive_timer_.async_wait([self = shared_from_this(), exchange = exchange_.id](error_code error) {
    if (!error) self->OnKeepalive(exchange);
  });
}

void HttpSession::OnKeepalive(uint64_t exchange) {
  if (!Accepts(exchange) || !exchange_.streaming) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - exchange_.last_write >= ToSteady(options_.sse_keepalive_interval)) {
    // A stalled write gets no comment piled behind it; the write timeout deals with that client.
    if (outputs_.empty()) {
      std::string comment(kKeepaliveComment);
      Enqueue(exchange_.chunked ? ChunkOf(comment) : std::move(comment), false);
    }
    exchange_.last_write = now;
  }
  ArmKeepalive();
}

// ---- Closing ---------------------------------------------------------------------------------------------

void HttpSession::CountRequest() {
  if (request_counted_) return;
  request_counted_ = true;
  state_->RequestStarted();
}

void HttpSession::UncountRequest() {
  if (!request_counted_) return;
  request_counted_ = false;
  state_->RequestEnded();
}

void HttpSession::StartDrain() {
  phase_ = Phase::kDraining;
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  drained_bytes_ = 0;
  ArmDeadline(std::min(kLingerTime, options_.read_timeout));
  if (!read_pending_) ReadSome();
}

void HttpSession::CloseSocket() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  error_code ignored;
  deadline_.cancel();
  write_timer_.cancel();
  keepalive_timer_.cancel();
  hang_up_timer_.cancel();
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (!outputs_.writing()) outputs_.Clear();  // else the write's buffers stay valid until its handler runs
  exchange_.on_gone = nullptr;
  outputs_.RunDrainedCallback();  // the producer learns the end from its own callbacks
  UncountRequest();
  self_.reset();
  ReleaseBody();
  if (!counted_closed_) {
    counted_closed_ = true;
    state_->ConnectionClosed();
    if (state_->observer() != nullptr) state_->observer()->OnConnectionClosed();
  }
}

}  // namespace llmc::gateway
