#ifndef LLMC_GATEWAY_HTTP_HTTP_SESSION_H_
#define LLMC_GATEWAY_HTTP_HTTP_SESSION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/parser.hpp"
#include "gateway/http/http_handler.h"
#include "gateway/http/http_router.h"
#include "gateway/http/http_server_state.h"
#include "gateway/http/output_queue.h"

namespace llmc::gateway {

// One client connection: reads a request, runs its route's handler, writes what the handler's
// ResponseWriter is given, and reads the next request once the response has ended (keep-alive).
//
// Threading: everything below runs on the session's strand (the socket's executor); the response writer
// posts onto it from any thread. While a response is in progress a small read stays pending, so a client
// that goes away is noticed (and its handler told) even when nothing is being written.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // `socket` must have been accepted onto its own strand.
  HttpSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<HttpServerState> state);
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  void Start();
  // Thread-safe: closes the connection; a handler still working is told its client is gone.
  void Close();
  // Thread-safe, for the server's drain: an idle keep-alive connection closes now; one with a request in
  // flight answers it with `Connection: close` and closes after it.
  void CloseWhenIdle();

 private:
  class Writer;
  friend class Writer;

  enum class Phase {
    kIdle,      // waiting for the first byte of a request (idle timeout)
    kReading,   // reading a request (read timeout)
    kHandling,  // a handler owns the exchange; its response is being written
    kDraining,  // an error response was sent; reading what the client still sends, then closing
    kClosed,
  };

  // One request and its response.
  struct Exchange {
    uint64_t id = 0;
    std::string method;
    std::string path;   // without the query
    std::string route;  // the matched route's path, "" when none matched
    std::string request_id;
    std::string allowed_origin;  // Access-Control-Allow-Origin to send, "" for none
    std::chrono::steady_clock::time_point started;
    bool keep_alive = false;
    bool chunked = true;  // HTTP/1.0 clients get an event stream without chunking, then a close
    int status = 0;
    bool response_started = false;
    bool streaming = false;
    bool ended = false;
    bool gone = false;
    bool logged = false;
    std::function<void()> on_gone;
    // Shared with the exchange's writer, which may outlive the session: set when the client went away.
    std::shared_ptr<std::atomic<bool>> gone_flag;
    std::chrono::steady_clock::time_point last_write;
  };

  // Reading.
  void WaitForRequest();
  void ReadSome();
  void OnReadSome(boost::system::error_code error, size_t bytes);
  void BeginRead();
  // Feeds what is buffered to the parser. When the request is not all there, `error` is need_more, or
  // clear with the parser not done (a header whose body has not started to arrive).
  void ParseBuffered(boost::system::error_code& error);
  void OnHeader(boost::system::error_code error);
  // What a request's header settles before its body is read: an unknown route (404), a wrong method (405) or
  // a missing API key (401), and the body budget (503). True when it answered, with Connection: close and
  // the body left unread; false when the body may be read (its bytes then reserved).
  bool RejectAtHeader();
  // Answers 404, 405 or 401 when `lookup` (of `method` on `target`) or `authorization` calls for one.
  bool AnswerRouteError(const HttpRouter::Lookup& lookup, absl::string_view method, absl::string_view target,
                        absl::string_view authorization);
  void ReleaseBody();
  void ReadBody();
  void OnBody(boost::system::error_code error);
  void OnReadError(boost::system::error_code error);
  void OnRequest();
  void Dispatch(const HttpRequest& request);

  // The exchange.
  void BeginExchange(absl::string_view method, absl::string_view target, absl::string_view request_id,
                     absl::string_view origin, bool keep_alive, unsigned version);
  void SendError(int status, absl::string_view message, absl::string_view type, absl::string_view code,
                 HttpHeaders extra_headers = {});
  void FinishExchange();
  void ClientGone();
  void LogExchange();
  std::string ResponseHead(int status, const HttpHeaders& headers) const;

  // What the writer applies; each ignores calls for an exchange other than the current one.
  void ApplySend(uint64_t exchange, int status, std::string content_type, std::string body, HttpHeaders headers);
  void ApplyStartEventStream(uint64_t exchange, HttpHeaders headers);
  void ApplyWriteEvent(uint64_t exchange, const SseEvent& sse);
  void ApplyEndEventStream(uint64_t exchange);
  void ApplyOnClientGone(uint64_t exchange, std::function<void()> callback);
  void ApplyWhenDrained(uint64_t exchange, std::function<void()> callback);
  bool Accepts(uint64_t exchange) const;

  // Writing: one async_write in flight, of what outputs_ gathers (up to one response's end); what comes
  // meanwhile is queued.
  void Enqueue(std::string bytes, bool ends_response);
  void WriteNext();
  void OnWrite(boost::system::error_code error);

  // Timers.
  void ArmDeadline(absl::Duration timeout);
  void DisarmDeadline();
  void OnDeadline();
  void ArmKeepalive();
  // While a handler works and the read-ahead is full (the client pipelined a large request), no read is
  // pending to notice the client leave: poll for its hang-up instead.
  void WatchForHangUp();
  void OnKeepalive(uint64_t exchange);

  // A request in flight, from its first byte to the end of its response, in the server's count.
  void CountRequest();
  void UncountRequest();

  void StartDrain();
  void CloseSocket();

  const std::shared_ptr<HttpServerState> state_;
  const HttpServerOptions& options_;
  const boost::asio::any_io_executor strand_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer write_timer_;
  boost::asio::steady_timer keepalive_timer_;
  boost::asio::steady_timer hang_up_timer_;

  Phase phase_ = Phase::kIdle;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool read_pending_ = false;
  bool timed_out_ = false;
  uint64_t deadline_generation_ = 0;
  uint64_t drained_bytes_ = 0;
  uint64_t reserved_body_bytes_ = 0;  // of the body being read, held in the server's body budget

  OutputQueue outputs_;
  bool flush_posted_ = false;
  uint64_t write_generation_ = 0;

  Exchange exchange_;
  uint64_t exchange_count_ = 0;
  // Keeps the session alive while a handler works and no I/O is pending; cleared when the exchange ends.
  std::shared_ptr<HttpSession> self_;
  bool counted_closed_ = false;
  bool request_counted_ = false;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_HTTP_SESSION_H_
