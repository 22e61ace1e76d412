#ifndef LLMC_GATEWAY_HTTP_HTTP_HANDLER_H_
#define LLMC_GATEWAY_HTTP_HTTP_HANDLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "boost/beast/http/message.hpp"
#include "boost/beast/http/string_body.hpp"
#include "gateway/http/sse_format.h"

namespace llmc::gateway {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// How a handler answers one request. Thread-safe: any method may be called from any thread (a gRPC
// callback thread, say); the session applies it on its own strand with one write in flight. Exactly one of
// Send or StartEventStream is called per request; calls after the response ended are ignored.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  // A complete response with a body.
  virtual void Send(int status, std::string content_type, std::string body, HttpHeaders extra_headers = {}) = 0;

  // Server-Sent Events: 200 with text/event-stream and headers that stop proxy buffering, then events as
  // they come (`data: <data>\n\n` each, after `event: <name>\n` for a named one), with comment lines while
  // the stream is quiet, until EndEventStream.
  virtual void StartEventStream(HttpHeaders extra_headers = {}) = 0;
  virtual void WriteEvent(SseEvent event) = 0;
  virtual void EndEventStream() = 0;
  // StartEventStream (when `start_stream`) and then WriteEvent for each of `events`, handed to the
  // connection at once, so they reach the client together rather than one wake-up and write each.
  virtual void WriteEvents(std::vector<SseEvent> events, bool start_stream = false) {
    if (start_stream) StartEventStream();
    for (SseEvent& event : events) WriteEvent(std::move(event));
  }

  // `callback` runs once, on some thread, if the client goes away (disconnects or the connection fails)
  // before the response ended. Set it before starting work that should be cancelled then.
  virtual void OnClientGone(std::function<void()> callback) = 0;

  // Back-pressure: `callback` runs once, on some thread, when what this response has queued for the
  // client is down to 16 KiB (at once if it already is, or if the response has ended), or when the
  // connection closes. A callback dropped uncalled (the server stopping) counts as called.
  // A producer that waits for it before producing more keeps a slow reader from growing the queue.
  virtual void WhenDrained(std::function<void()> callback) = 0;

  // The id of this request (X-Request-Id if the client sent a sane one, else generated), for logs.
  virtual const std::string& request_id() const = 0;
};

// A route's handler. Runs on the session's strand; it must not block: long work answers through the writer
// later, from whatever thread.
using HttpHandler = std::function<void(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer)>;

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_HTTP_HANDLER_H_
