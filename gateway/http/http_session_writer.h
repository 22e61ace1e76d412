#ifndef LLMC_GATEWAY_HTTP_HTTP_SESSION_WRITER_H_
#define LLMC_GATEWAY_HTTP_HTTP_SESSION_WRITER_H_

// HttpSession's ResponseWriter, apart from the session's reading and writing (http_session.cc).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "boost/asio/post.hpp"
#include "gateway/http/http_session.h"

namespace llmc::gateway {

// The ResponseWriter a handler gets: posts each call to the session's strand, tagged with its exchange so
// calls that arrive after the response ended (or for an earlier request) are ignored.
class HttpSession::Writer final : public ResponseWriter {
 public:
  Writer(std::weak_ptr<HttpSession> session, std::shared_ptr<HttpServerState> state, uint64_t exchange,
         std::string request_id, std::shared_ptr<std::atomic<bool>> gone)
      : session_(std::move(session)),
        state_(std::move(state)),
        exchange_(exchange),
        request_id_(std::move(request_id)),
        gone_(std::move(gone)) {}

  void Send(int status, std::string content_type, std::string body, HttpHeaders extra_headers) override {
    Post([exchange = exchange_, status, content_type = std::move(content_type), body = std::move(body),
          headers = std::move(extra_headers)](HttpSession& session) mutable {
      session.ApplySend(exchange, status, std::move(content_type), std::move(body), std::move(headers));
    });
  }

  void StartEventStream(HttpHeaders extra_headers) override {
    Post([exchange = exchange_, headers = std::move(extra_headers)](HttpSession& session) mutable {
      session.ApplyStartEventStream(exchange, std::move(headers));
    });
  }

  void WriteEvent(SseEvent event) override {
    Post([exchange = exchange_, event = std::move(event)](HttpSession& session) mutable {
      session.ApplyWriteEvent(exchange, event);
    });
  }

  void WriteEvents(std::vector<SseEvent> events, bool start_stream) override {
    Post([exchange = exchange_, events = std::move(events), start_stream](HttpSession& session) mutable {
      if (start_stream) session.ApplyStartEventStream(exchange, {});
      for (const SseEvent& event : events) session.ApplyWriteEvent(exchange, event);
    });
  }

  void EndEventStream() override {
    Post([exchange = exchange_](HttpSession& session) { session.ApplyEndEventStream(exchange); });
  }

  void OnClientGone(std::function<void()> callback) override {
    // The session closed (and may be gone) after its client left: the callback is still owed.
    if (!PostCallback(&HttpSession::ApplyOnClientGone, callback) && gone_->load()) callback();
  }

  void WhenDrained(std::function<void()> callback) override {
    if (!PostCallback(&HttpSession::ApplyWhenDrained, callback)) callback();  // no session: nothing is queued
  }

  const std::string& request_id() const override { return request_id_; }

 private:
  template <typename Fn>
  void Post(Fn fn) {
    state_->RunWhileOpen([&] {
      auto session = session_.lock();
      if (session == nullptr) return;
      boost::asio::post(session->strand_, [session, fn = std::move(fn)]() mutable { fn(*session); });
    });
  }

  // Posts (session.*apply)(exchange, callback) to the session's strand, moving `callback`; false, with
  // `callback` untouched, when the session is gone or the server stopped.
  bool PostCallback(void (HttpSession::*apply)(uint64_t, std::function<void()>), std::function<void()>& callback) {
    bool posted = false;
    state_->RunWhileOpen([&] {
      auto session = session_.lock();
      if (session == nullptr) return;
      posted = true;
      boost::asio::post(session->strand_,
                        [session, apply, exchange = exchange_, callback = std::move(callback)]() mutable {
                          ((*session).*apply)(exchange, std::move(callback));
                        });
    });
    return posted;
  }

  const std::weak_ptr<HttpSession> session_;
  const std::shared_ptr<HttpServerState> state_;
  const uint64_t exchange_;
  const std::string request_id_;
  const std::shared_ptr<std::atomic<bool>> gone_;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_HTTP_SESSION_WRITER_H_
