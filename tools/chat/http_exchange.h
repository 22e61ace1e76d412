#ifndef LLMC_TOOLS_CHAT_HTTP_EXCHANGE_H_
#define LLMC_TOOLS_CHAT_HTTP_EXCHANGE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/bench/openai_protocol.h"

namespace llmc::chat {

struct HttpExchangeRequest {
  std::string method = "POST";  // GET or POST
  std::string path;
  std::string body;  // JSON; sent when not empty
  std::string accept = "application/json";
  std::string api_key;  // empty: no Authorization header
  // Longest wait for the connection, and then for each next piece of the answer.
  absl::Duration idle_timeout = absl::Seconds(300);
  // Readable when the exchange must stop (InterruptSignal::fd()); -1 for none. Not drained here.
  int cancel_fd = -1;
};

struct HttpExchangeCallbacks {
  std::function<void(int status)> on_status;             // once the header arrived
  std::function<void(absl::string_view bytes)> on_body;  // each piece of the body as it arrives
};

// One HTTP/1.1 exchange over a fresh connection, on the calling thread, handing the body over as it
// arrives (for server-sent events). Returns the status code. Errors: CANCELLED when `cancel_fd` became
// readable (the connection is closed at once, which tells the server to drop the request), UNAVAILABLE when
// the server cannot be reached or the connection broke, DEADLINE_EXCEEDED when the server stayed silent
// for `idle_timeout`.
absl::StatusOr<int> ExchangeHttp(const bench::ServerUrl& url, const HttpExchangeRequest& request,
                                 const HttpExchangeCallbacks& callbacks);

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// ExchangeHttp collecting the whole body (at most 16 MiB).
absl::StatusOr<HttpAnswer> FetchHttp(const bench::ServerUrl& url, const HttpExchangeRequest& request);

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_HTTP_EXCHANGE_H_
