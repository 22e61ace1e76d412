#ifndef LLMC_TESTS_SUPPORT_HTTP_CLIENT_H_
#define LLMC_TESTS_SUPPORT_HTTP_CLIENT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace llmc::testing {

namespace internal {
struct HttpConnection;
}  // namespace internal

using HttpHeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpReply {
  int status = 0;                              // 0 when no whole response arrived (see `error`)
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string error;  // why there is no response

  // The header's value, or "" when absent; `name` in any case.
  std::string Header(const std::string& name) const;
};

// One blocking HTTP/1.1 request over a fresh connection to 127.0.0.1:`port`, bounded by `timeout` in all.
// The body goes out as is (any bytes) with Content-Length; `headers` are added after Host.
HttpReply HttpCall(int port, const std::string& method, const std::string& target, const std::string& body = "",
                   const HttpHeaderList& headers = {}, absl::Duration timeout = absl::Seconds(60));

// POST with Content-Type: application/json (unless `headers` name another).
HttpReply PostJson(int port, const std::string& target, const std::string& body, const HttpHeaderList& headers = {},
                   absl::Duration timeout = absl::Seconds(60));

// A streaming request whose answer is read incrementally as Server-Sent Events. Every read is bounded.
// Events are parsed strictly as the gateway writes them: blocks separated by a blank line ("\n\n"), each
// made of `data: ` lines (joined with "\n" as the SSE spec says) and `:` comment lines; any other line is
// recorded in framing_errors().
class SseClient {
 public:
  // Connects, sends the request and reads the response head. status() is 0 when that failed.
  SseClient(int port, const std::string& target, const std::string& body, const HttpHeaderList& headers = {},
            absl::Duration timeout = absl::Seconds(60));
  ~SseClient();
  SseClient(const SseClient&) = delete;
  SseClient& operator=(const SseClient&) = delete;

  int status() const { return status_; }
  std::string Header(const std::string& name) const;
  const std::string& error() const { return error_; }

  // The next event's data; nullopt when the response ended (or failed, or `timeout` passed) first.
  std::optional<std::string> NextEvent(absl::Duration timeout = absl::Seconds(60));
  // Every remaining event until the response ends, bounded by `timeout` in all.
  std::vector<std::string> ReadAll(absl::Duration timeout = absl::Seconds(120));
  // The rest of a non-streaming answer (an error body, say).
  std::string ReadBody(absl::Duration timeout = absl::Seconds(30));

  // True once the whole HTTP response arrived (the last chunk of a chunked body).
  bool complete() const;
  // True when the response ended with an error or a timeout rather than completely.
  bool failed() const { return failed_; }
  // Every body byte received so far (after de-chunking), for framing checks.
  const std::string& raw() const { return raw_; }
  const std::vector<std::string>& framing_errors() const { return framing_errors_; }
  // The `event:` name of each event returned so far, in order ("" for an event without one).
  const std::vector<std::string>& event_names() const { return event_names_; }
  int comments() const { return comments_; }

  // Closes the connection at once, as a client that goes away would.
  void Close();

 private:
  bool ReadMore(absl::Time deadline);

  std::unique_ptr<internal::HttpConnection> connection_;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  std::string error_;
  bool failed_ = false;
  std::string raw_;
  size_t consumed_ = 0;  // bytes of raw_ already parsed into events
  std::vector<std::string> framing_errors_;
  std::vector<std::string> event_names_;
  int comments_ = 0;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_HTTP_CLIENT_H_
