// Fuzzes the gateway's HTTP/1.1 server as a client would reach it: each input is written to a fresh
// loopback connection of an in-process HttpServer (the real sessions, limits, auth and CORS), the client
// half-closes, and the server must answer with HTTP or close, never hang or crash. Every 64 inputs a plain
// request checks that the server still serves. The routes parse OpenAI bodies and stream SSE events, like
// the gateway's.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "gateway/http/http_server.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_request.h"

namespace {

using llmc::gateway::HttpRequest;
using llmc::gateway::ResponseWriter;

constexpr int kReplyTimeoutSeconds = 10;
constexpr size_t kMaxReplyBytes = 1 << 20;
constexpr int kMaxConnectAttempts = 400;  // 20 s

[[noreturn]] void Fail(const std::string& what) {
  std::cerr << what << "\n";
  std::abort();
}

void AnswerCompletion(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  auto parsed = llmc::gateway::ParseCompletionRequest(request.body());
  if (!parsed.ok()) {
    writer->Send(llmc::gateway::HttpStatusOf(parsed.status()), "application/json",
                 llmc::gateway::ErrorEnvelope(parsed.status()));
    return;
  }
  writer->Send(200, "application/json", R"({"object":"text_completion","choices":[]})");
}

void StreamChat(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  auto parsed = llmc::gateway::ParseChatCompletionRequest(request.body());
  if (!parsed.ok()) {
    writer->Send(llmc::gateway::HttpStatusOf(parsed.status()), "application/json",
                 llmc::gateway::ErrorEnvelope(parsed.status()));
    return;
  }
  writer->StartEventStream();
  writer->WriteEvent(R"({"choices":[{"delta":{"content":"hi"}}]})");
  writer->WriteEvent("[DONE]");
  writer->EndEventStream();
}

// A global root, so that LeakSanitizer sees the server that lives for the whole run as reachable.
llmc::gateway::HttpServer* fuzz_server = nullptr;

uint16_t ServerPort() {
  static const uint16_t port = [] {
    llmc::SetMinLogLevel(llmc::LogLevel::kWarning);  // one access-log line per input would swamp the log
    llmc::gateway::HttpServerOptions options;
    options.num_threads = 1;
    options.max_body_bytes = 64 << 10;
    options.max_header_bytes = 8 << 10;
    options.read_timeout = absl::Seconds(5);
    options.idle_timeout = absl::Seconds(5);
    options.write_timeout = absl::Seconds(5);
    options.api_keys = {"fuzz-key"};
    options.cors_allow_origins = {"https://chat.example"};
    fuzz_server = new llmc::gateway::HttpServer(options);  // lives for the whole run
    auto* server = fuzz_server;
    server->Route("POST", "/v1/completions", AnswerCompletion);
    server->Route("POST", "/v1/chat/completions", StreamChat);
    server->Route(
        "GET", "/health",
        [](const HttpRequest&, std::shared_ptr<ResponseWriter> writer) { writer->Send(200, "text/plain", "ok"); },
        /*requires_auth=*/false);
    auto address = server->Start("127.0.0.1:0");
    if (!address.ok()) Fail("cannot start the server: " + address.status().ToString());
    return address->port;
  }();
  return port;
}

// A connect interrupted by a signal goes on in the background: wait for it and read its outcome.
bool FinishInterruptedConnect(int fd) {
  pollfd poll_fd{fd, POLLOUT, 0};
  int ready = -1;
  do {
    ready = poll(&poll_fd, 1, kReplyTimeoutSeconds * 1000);
  } while (ready < 0 && errno == EINTR);
  int error = 0;
  socklen_t length = sizeof(error);
  if (ready != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return false;
  errno = error;
  return error == 0;
}

// Writes `request` to a new connection, half-closes it, and returns what the server sent until it closed.
std::string Exchange(absl::string_view request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Fail("socket failed");
  timeval timeout{kReplyTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(ServerPort());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Thousands of connections a second leave as many in TIME_WAIT; when the client runs out of ports,
  // wait for some to expire (bounded) rather than report the harness's limit as a server failure.
  for (int attempt = 0; connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0; ++attempt) {
    if (errno == EINTR && FinishInterruptedConnect(fd)) break;  // libFuzzer's timers interrupt system calls
    if (errno != EADDRNOTAVAIL && errno != EAGAIN) Fail(std::string("connect failed: ") + std::strerror(errno));
    if (attempt == kMaxConnectAttempts) Fail("connect failed: no local port came free");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early (413, 431, a malformed request)
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string reply;
  char buffer[16384];
  while (reply.size() < kMaxReplyBytes) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) Fail("the server neither answered nor closed in time");
      break;  // reset: the server closed with unread input
    }
    reply.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return reply;
}

void CheckStillServing() {
  const std::string reply = Exchange("GET /health HTTP/1.1\r\nHost: fuzz\r\n\r\n");
  if (!absl::StartsWith(reply, "HTTP/1.1 200")) Fail("the server stopped serving; it answered:\n" + reply);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint64_t inputs = 0;
  const std::string reply = Exchange(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!reply.empty() && !absl::StartsWith(reply, "HTTP/1.1 ")) Fail("the reply is not HTTP/1.1:\n" + reply);
  if (++inputs % 64 == 0) CheckStillServing();
  return 0;
}
