// The gateway's HTTP server in-process on a loopback port, driven by raw sockets and Beast's parser.
#include "gateway/http/http_server.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "nlohmann/json.hpp"
#include "tests/gateway/http_test_client.h"
#include "tests/support/catch.h"
#include "tests/support/wait.h"

namespace llmc::gateway {
namespace {

using testing::HttpTestClient;
using testing::RawRequest;
using testing::TestResponse;
using testing::WaitUntil;

// Threads the handlers start, joined when the test ends.
class Background {
 public:
  ~Background() {
    for (auto& thread : threads_) thread.join();
  }
  void Run(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back(std::move(fn));
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

class CountingObserver : public HttpObserver {
 public:
  void OnConnectionOpened() override { ++opened; }
  void OnConnectionClosed() override { ++closed; }
  void OnRequestDone(absl::string_view method, absl::string_view route, int status, absl::Duration) override {
    absl::MutexLock lock(&mu);
    requests.push_back(absl::StrCat(method, " ", route, " ", status));
  }
  std::vector<std::string> Requests() {
    absl::MutexLock lock(&mu);
    return requests;
  }

  std::atomic<int> opened{0};
  std::atomic<int> closed{0};
  absl::Mutex mu;
  std::vector<std::string> requests ABSL_GUARDED_BY(mu);
};

HttpServerOptions SmallOptions() {
  HttpServerOptions options;
  options.num_threads = 2;
  options.max_body_bytes = 1024;
  options.max_header_bytes = 1024;
  options.read_timeout = absl::Seconds(5);
  options.idle_timeout = absl::Seconds(5);
  options.sse_keepalive_interval = absl::Seconds(30);
  return options;
}

// A server with a few test routes: GET /hello, POST /echo, GET /open (no auth), POST /stream (events
// named in the body, one per line, written from another thread), GET /later (answered from another thread).
struct TestServer {
  explicit TestServer(HttpServerOptions options = SmallOptions(), std::shared_ptr<HttpObserver> observer = nullptr)
      : server(std::move(options), std::move(observer)) {
    server.Route("GET", "/hello", [](const HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
      writer->Send(200, "text/plain", "hello");
    });
    server.Route("POST", "/echo", [](const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
      writer->Send(200, "application/octet-stream", request.body(), {{"X-Echo", "yes"}});
    });
    server.Route(
        "GET", "/open",
        [](const HttpRequest&, std::shared_ptr<ResponseWriter> writer) { writer->Send(200, "text/plain", "open"); },
        /*requires_auth=*/false);
    server.Route("GET", "/later", [this](const HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
      background.Run([writer] {
        absl::SleepFor(absl::Milliseconds(100));
        writer->Send(200, "text/plain", "later");
      });
    });
    server.Route("GET", "/throws",
                 [](const HttpRequest&, std::shared_ptr<ResponseWriter>) { throw std::runtime_error("handler bug"); });
    // Both keep their writer for the test to drive, and count OnClientGone.
    server.Route("POST", "/stream", [this](const HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
      writer->OnClientGone([this] { ++gone; });
      writer->StartEventStream({{"X-Stream", "1"}});
      absl::MutexLock lock(&mu);
      pending = writer;
    });
    // A first token's worth of output handed over at once: the stream's head and three events.
    server.Route("POST", "/batch", [](const HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
      writer->WriteEvents({"a", "b", "c"}, /*start_stream=*/true);
      writer->WriteEvents({"d"});
      writer->EndEventStream();
    });
    server.Route("GET", "/pending", [this](const HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
      writer->OnClientGone([this] { ++gone; });
      absl::MutexLock lock(&mu);
      pending = writer;
    });
    auto address = server.Start("127.0.0.1:0");
    REQUIRE(address.ok());
    port = address->port;
  }

  std::shared_ptr<ResponseWriter> Pending() {
    absl::MutexLock lock(&mu);
    return pending;
  }
  std::shared_ptr<ResponseWriter> WaitForPending() {
    WaitUntil([&] { return Pending() != nullptr; }, absl::Seconds(5));
    return Pending();
  }

  // Declared before the server, so they outlive it.
  Background background;
  absl::Mutex mu;
  std::shared_ptr<ResponseWriter> pending ABSL_GUARDED_BY(mu);
  std::atomic<int> gone{0};
  HttpServer server;
  uint16_t port = 0;
};

nlohmann::json ErrorOf(const TestResponse& response) {
  REQUIRE(response[boost::beast::http::field::content_type] == "application/json");
  const auto body = nlohmann::json::parse(response.body());
  REQUIRE(body.contains("error"));
  REQUIRE(body["error"]["param"].is_null());
  REQUIRE(body["error"]["message"].is_string());
  return body["error"];
}

TEST_CASE("http server: keep-alive serves two requests on one connection, each with a request id", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  REQUIRE(client.connected());
  auto first = client.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(first);
  CHECK(first->result_int() == 200);
  CHECK(first->body() == "hello");
  CHECK(first->keep_alive());
  const std::string first_id(first->at("X-Request-Id"));
  CHECK(first_id.size() == 32);

  auto second = client.RoundTrip(RawRequest("POST", "/echo?x=1", {{"X-Request-Id", "client-id-7"}}, "payload"));
  REQUIRE(second);
  CHECK(second->result_int() == 200);
  CHECK(second->body() == "payload");
  CHECK(second->at("X-Echo") == "yes");
  CHECK(second->at("X-Request-Id") == "client-id-7");

  // An id that would not be safe in logs is replaced.
  auto third = client.RoundTrip(RawRequest("GET", "/hello", {{"X-Request-Id", "bad id with spaces"}}));
  REQUIRE(third);
  CHECK(third->at("X-Request-Id") != "bad id with spaces");
  CHECK(third->at("X-Request-Id") != first_id);
}

TEST_CASE("http server: unknown paths get 404 and wrong methods 405, in the OpenAI envelope", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  auto missing = client.RoundTrip(RawRequest("GET", "/v1/nothing"));
  REQUIRE(missing);
  CHECK(missing->result_int() == 404);
  auto error = ErrorOf(*missing);
  CHECK(error["type"] == "invalid_request_error");
  CHECK(error["code"] == "not_found");
  CHECK(error["message"].get<std::string>().find("/v1/nothing") != std::string::npos);

  auto wrong = client.RoundTrip(RawRequest("DELETE", "/echo"));
  REQUIRE(wrong);
  CHECK(wrong->result_int() == 405);
  CHECK(wrong->at(boost::beast::http::field::allow) == "POST");
  error = ErrorOf(*wrong);
  CHECK(error["type"] == "invalid_request_error");
  CHECK(error["code"] == "method_not_allowed");

  // The connection survives both.
  auto ok = client.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(ok);
  CHECK(ok->result_int() == 200);
}

TEST_CASE("http server: a body over the limit gets 413 and a close, the server keeps serving", "[unit][http]") {
  TestServer server;
  {
    HttpTestClient client(server.port);
    auto at_limit = client.RoundTrip(RawRequest("POST", "/echo", {}, std::string(1024, 'a')));
    REQUIRE(at_limit);
    CHECK(at_limit->result_int() == 200);
    CHECK(at_limit->body().size() == 1024);

    auto too_big = client.RoundTrip(RawRequest("POST", "/echo", {}, std::string(4096, 'b')));
    REQUIRE(too_big);
    CHECK(too_big->result_int() == 413);
    CHECK(ErrorOf(*too_big)["code"] == "request_too_large");
    CHECK_FALSE(too_big->keep_alive());
    CHECK(client.PeerCloses(absl::Seconds(5)));
  }
  {
    // A chunked body over the limit is caught while it streams in.
    HttpTestClient client(server.port);
    const std::string chunk(600, 'c');
    auto response = client.RoundTrip("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n" +
                                     chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n");
    REQUIRE(response);
    CHECK(response->result_int() == 413);
  }
  HttpTestClient client(server.port);
  auto after = client.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(after);
  CHECK(after->result_int() == 200);
}

TEST_CASE("http server: Expect 100-continue gets its interim answer before the body", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  REQUIRE(client.Write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = client.Read();
  REQUIRE(interim);
  CHECK(interim->result_int() == 100);
  auto response = client.RoundTrip("hello");
  REQUIRE(response);
  CHECK(response->result_int() == 200);
  CHECK(response->body() == "hello");
}

TEST_CASE("http server: a header block over the limit gets 431", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  auto response = client.RoundTrip(RawRequest("GET", "/hello", {{"X-Big", std::string(4096, 'h')}}));
  REQUIRE(response);
  CHECK(response->result_int() == 431);
  CHECK(ErrorOf(*response)["code"] == "request_header_fields_too_large");
  CHECK(client.PeerCloses(absl::Seconds(5)));
}

TEST_CASE("http server: malformed HTTP gets 400 and a close", "[unit][http]") {
  TestServer server;
  for (const std::string& garbage : {std::string("GARBAGE\r\n\r\n"), std::string("GET /hello HTTP/9\r\n\r\n"),
                                     std::string("GET /hello HTTP/1.1\r\nBad Header\r\n\r\n")}) {
    INFO(garbage);
    HttpTestClient client(server.port);
    auto response = client.RoundTrip(garbage);
    REQUIRE(response);
    CHECK(response->result_int() == 400);
    CHECK(ErrorOf(*response)["code"] == "bad_request");
    CHECK(client.PeerCloses(absl::Seconds(5)));
  }
}

TEST_CASE("http server: API keys guard routes that require them", "[unit][http]") {
  HttpServerOptions options = SmallOptions();
  options.api_keys = {"sk-first", "sk-second"};
  TestServer server(options);
  HttpTestClient client(server.port);

  auto missing = client.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(missing);
  CHECK(missing->result_int() == 401);
  CHECK(ErrorOf(*missing)["code"] == "invalid_api_key");

  for (const std::string wrong : {"Bearer sk-firs", "Bearer sk-first2", "Basic sk-first", "sk-first", "Bearer "}) {
    INFO(wrong);
    auto response = client.RoundTrip(RawRequest("GET", "/hello", {{"Authorization", wrong}}));
    REQUIRE(response);
    CHECK(response->result_int() == 401);
    CHECK(ErrorOf(*response)["type"] == "authentication_error");
  }
  auto first = client.RoundTrip(RawRequest("GET", "/hello", {{"Authorization", "Bearer sk-first"}}));
  REQUIRE(first);
  CHECK(first->result_int() == 200);
  auto second = client.RoundTrip(RawRequest("GET", "/hello", {{"Authorization", "bearer sk-second"}}));
  REQUIRE(second);
  CHECK(second->result_int() == 200);
  auto open = client.RoundTrip(RawRequest("GET", "/open"));
  REQUIRE(open);
  CHECK(open->result_int() == 200);
  CHECK(open->body() == "open");
}

TEST_CASE("http server: route and key are checked from the header, before the body is read", "[unit][http]") {
  HttpServerOptions options = SmallOptions();
  options.api_keys = {"sk-first"};
  TestServer server(options);
  for (const auto& [target, key, status] : std::vector<std::tuple<std::string, std::string, unsigned>>{
           {"/echo", "", 401}, {"/echo", "Bearer sk-wrong", 401}, {"/nowhere", "Bearer sk-first", 404}}) {
    INFO(target << " " << key);
    HttpTestClient client(server.port);
    // The header announces a body that never comes: the answer cannot have waited for it.
    std::string head = "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n";
    if (!key.empty()) head += "Authorization: " + key + "\r\n";
    REQUIRE(client.Write(head + "\r\n"));
    auto response = client.Read();
    REQUIRE(response);
    CHECK(response->result_int() == status);  // not 100 Continue first
    CHECK_FALSE(response->keep_alive());
    CHECK(client.PeerCloses(absl::Seconds(5)));
  }
  // A declared body over the limit: the missing key is what the client hears of first.
  HttpTestClient client(server.port);
  auto response = client.RoundTrip("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
  REQUIRE(response);
  CHECK(response->result_int() == 401);
}

TEST_CASE("http server: a body beyond max_inflight_body_bytes gets 503 with Retry-After", "[unit][http]") {
  HttpServerOptions options = SmallOptions();
  options.max_inflight_body_bytes = 1024;
  options.retry_after_seconds = 7;
  TestServer server(options);
  HttpTestClient first(server.port);
  REQUIRE(first.Write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = first.Read();
  REQUIRE(interim);
  REQUIRE(interim->result_int() == 100);
  {
    HttpTestClient second(server.port);
    REQUIRE(second.Write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"));
    auto refused = second.Read();
    REQUIRE(refused);
    CHECK(refused->result_int() == 503);
    CHECK((*refused)["Retry-After"] == "7");
    CHECK(ErrorOf(*refused)["code"] == "too_many_request_bodies");
  }
  // Once the first body is whole, its share is free again.
  auto echoed = first.RoundTrip(std::string(1024, 'a'));
  REQUIRE(echoed);
  CHECK(echoed->result_int() == 200);
  HttpTestClient third(server.port);
  auto accepted = third.RoundTrip(RawRequest("POST", "/echo", {}, std::string(10, 'b')));
  REQUIRE(accepted);
  CHECK(accepted->result_int() == 200);
}

TEST_CASE("http server: a connection beyond max_connections gets 503 and is closed", "[unit][http]") {
  HttpServerOptions options = SmallOptions();
  options.max_connections = 2;
  auto observer = std::make_shared<CountingObserver>();
  TestServer server(options, observer);
  std::vector<std::unique_ptr<HttpTestClient>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<HttpTestClient>(server.port));
    auto response = held.back()->RoundTrip(RawRequest("GET", "/hello"));
    REQUIRE(response);
    REQUIRE(response->result_int() == 200);
  }
  {
    HttpTestClient extra(server.port);
    auto refused = extra.Read();
    REQUIRE(refused);
    CHECK(refused->result_int() == 503);
    CHECK_FALSE(refused->keep_alive());
    CHECK(ErrorOf(*refused)["code"] == "too_many_connections");
    CHECK(extra.PeerCloses(absl::Seconds(5)));
  }
  CHECK(observer->opened == 2);
  held.pop_back();
  CHECK(WaitUntil(
      [&] {
        HttpTestClient next(server.port);
        auto response = next.RoundTrip(RawRequest("GET", "/hello"));
        return response && response->result_int() == 200;
      },
      absl::Seconds(5)));
}

TEST_CASE("http server: CORS preflight and headers follow the allowed origins", "[unit][http]") {
  HttpServerOptions options = SmallOptions();
  options.api_keys = {"sk-key"};
  options.cors_allow_origins = {"https://app.example"};
  TestServer server(options);
  HttpTestClient client(server.port);

  // Preflights carry no credentials and must not need them.
  auto preflight = client.RoundTrip(RawRequest("OPTIONS", "/echo",
                                               {{"Origin", "https://app.example"},
                                                {"Access-Control-Request-Method", "POST"},
                                                {"Access-Control-Request-Headers", "authorization, content-type"}}));
  REQUIRE(preflight);
  CHECK(preflight->result_int() == 204);
  CHECK(preflight->at("Access-Control-Allow-Origin") == "https://app.example");
  CHECK(preflight->at("Access-Control-Allow-Methods").find("POST") != boost::beast::string_view::npos);
  CHECK(preflight->at("Access-Control-Allow-Headers").find("Authorization") != boost::beast::string_view::npos);
  CHECK(preflight->at("Access-Control-Allow-Headers").find("Content-Type") != boost::beast::string_view::npos);
  CHECK(preflight->at("Access-Control-Max-Age") == "86400");

  auto normal = client.RoundTrip(
      RawRequest("GET", "/hello", {{"Origin", "https://app.example"}, {"Authorization", "Bearer sk-key"}}));
  REQUIRE(normal);
  CHECK(normal->result_int() == 200);
  CHECK(normal->at("Access-Control-Allow-Origin") == "https://app.example");

  // Errors carry it too, so browsers can read them.
  auto unauthorized = client.RoundTrip(RawRequest("GET", "/hello", {{"Origin", "https://app.example"}}));
  REQUIRE(unauthorized);
  CHECK(unauthorized->result_int() == 401);
  CHECK(unauthorized->at("Access-Control-Allow-Origin") == "https://app.example");

  auto stranger = client.RoundTrip(RawRequest("OPTIONS", "/echo", {{"Origin", "https://evil.example"}}));
  REQUIRE(stranger);
  CHECK(stranger->find("Access-Control-Allow-Origin") == stranger->end());

  HttpServerOptions any = SmallOptions();
  any.cors_allow_origins = {"*"};
  TestServer open_server(any);
  HttpTestClient other(open_server.port);
  auto star = other.RoundTrip(RawRequest("GET", "/hello", {{"Origin", "https://whoever.example"}}));
  REQUIRE(star);
  CHECK(star->at("Access-Control-Allow-Origin") == "*");
}

TEST_CASE("http server: an event stream is chunked SSE, written from another thread, and keeps the connection",
          "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  REQUIRE(client.Write(RawRequest("POST", "/stream", {}, "{}")));
  REQUIRE(client.StartStream());
  const auto& head = client.stream_head();
  CHECK(head.result_int() == 200);
  CHECK(head[boost::beast::http::field::content_type] == "text/event-stream");
  CHECK(head[boost::beast::http::field::cache_control] == "no-cache");
  CHECK(head["X-Accel-Buffering"] == "no");
  CHECK(head[boost::beast::http::field::connection] == "keep-alive");
  CHECK(head.chunked());
  CHECK(head["X-Stream"] == "1");
  CHECK(!head["X-Request-Id"].empty());

  auto writer = server.WaitForPending();
  REQUIRE(writer != nullptr);
  // JSON as the OpenAI routes write it: escapes, quotes, backslashes, CJK and an emoji pass through as is.
  const std::string tricky = R"({"text":"line\nbreak \"quoted\" back\\slash \u0000 中文 😀"})";
  std::thread producer([writer, tricky] {
    writer->WriteEvent(R"({"n":1})");
    writer->WriteEvent(tricky);
    writer->WriteEvent("raw\nnewline");
    writer->WriteEvent("[DONE]");
    writer->EndEventStream();
    writer->WriteEvent("after the end: dropped");
    writer->Send(200, "text/plain", "after the end: dropped");
  });
  client.ReadChunks([](const auto&) { return false; });
  producer.join();
  REQUIRE(client.StreamComplete());
  const std::vector<std::string> expected = {"data: {\"n\":1}\n\n", "data: " + tricky + "\n\n",
                                             "data: raw\ndata: newline\n\n", "data: [DONE]\n\n"};
  CHECK(client.chunks() == expected);

  // The connection stays up after the last chunk and serves the next request.
  auto next = client.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(next);
  CHECK(next->result_int() == 200);
  CHECK(next->body() == "hello");
  CHECK(server.gone == 0);
}

TEST_CASE("http server: events handed over together start the stream and leave in one write", "[unit][http]") {
  TestServer server;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port});
  boost::asio::write(socket, boost::asio::buffer(RawRequest("POST", "/batch", {}, "{}")));
  // One read takes what one send put on the loopback connection: the head and the first hand-over.
  std::string first(4096, '\0');
  first.resize(socket.read_some(boost::asio::buffer(first)));
  CHECK(absl::StartsWith(first, "HTTP/1.1 200"));
  CHECK(absl::StrContains(first, "data: a\n\n\r\n"));
  CHECK(absl::StrContains(first, "data: c\n\n\r\n"));

  HttpTestClient client(server.port);
  REQUIRE(client.Write(RawRequest("POST", "/batch", {}, "{}")));
  REQUIRE(client.StartStream());
  CHECK(client.stream_head()[boost::beast::http::field::content_type] == "text/event-stream");
  client.ReadChunks([](const auto&) { return false; });
  REQUIRE(client.StreamComplete());
  const std::vector<std::string> expected = {"data: a\n\n", "data: b\n\n", "data: c\n\n", "data: d\n\n"};
  CHECK(client.chunks() == expected);
}

TEST_CASE("http server: a request that arrives in pieces is read whole", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  const std::string request = RawRequest("POST", "/echo", {}, "split body");
  const size_t header_end = request.find("\r\n\r\n") + 4;
  // Part of the header, the rest of it, then the body: each arrives on its own.
  REQUIRE(client.Write(request.substr(0, 10)));
  absl::SleepFor(absl::Milliseconds(50));
  REQUIRE(client.Write(request.substr(10, header_end - 10)));
  absl::SleepFor(absl::Milliseconds(50));
  REQUIRE(client.Write(request.substr(header_end)));
  auto response = client.Read();
  REQUIRE(response);
  CHECK(response->result_int() == 200);
  CHECK(response->body() == "split body");
  // The header with half the body, then the rest.
  const std::string second = RawRequest("POST", "/echo", {}, "second body");
  const size_t second_body = second.find("\r\n\r\n") + 4;
  REQUIRE(client.Write(second.substr(0, second_body + 3)));
  absl::SleepFor(absl::Milliseconds(50));
  REQUIRE(client.Write(second.substr(second_body + 3)));
  auto echoed = client.Read();
  REQUIRE(echoed);
  CHECK(echoed->body() == "second body");
  // The next request on the connection comes whole and is answered too.
  auto next = client.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(next);
  CHECK(next->body() == "hello");
}

TEST_CASE("http server: a client that half-closes after its request still gets the whole answer", "[unit][http]") {
  TestServer server;
  // The answer is ready at once, so the client's end of input races with it: repeat to meet both orders.
  for (int attempt = 0; attempt < 20; ++attempt) {
    HttpTestClient client(server.port);
    REQUIRE(client.Write(attempt % 2 == 0 ? RawRequest("GET", "/hello") : RawRequest("POST", "/echo", {}, "ping")));
    client.CloseSend();
    auto response = client.Read();
    REQUIRE(response);
    CHECK(response->result_int() == 200);
    CHECK(response->body() == (attempt % 2 == 0 ? "hello" : "ping"));
    CHECK(client.PeerCloses(absl::Seconds(5)));
  }
}

TEST_CASE("http server: a quiet stream gets keep-alive comments", "[unit][http]") {
  HttpServerOptions options = SmallOptions();
  options.sse_keepalive_interval = absl::Milliseconds(100);
  TestServer server(options);
  HttpTestClient client(server.port);
  REQUIRE(client.Write(RawRequest("POST", "/stream", {}, "{}")));
  REQUIRE(client.StartStream());
  auto writer = server.WaitForPending();
  REQUIRE(writer != nullptr);
  writer->WriteEvent("first");
  REQUIRE(client.ReadChunks([](const std::vector<std::string>& chunks) {
    return std::count(chunks.begin(), chunks.end(), ": keep-alive\n\n") >= 2;
  }));
  CHECK(client.chunks().front() == "data: first\n\n");
  writer->EndEventStream();
  client.ReadChunks([](const auto&) { return false; });
  CHECK(client.StreamComplete());
}

TEST_CASE("http server: a client leaving mid-stream fires OnClientGone once", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  REQUIRE(client.Write(RawRequest("POST", "/stream", {}, "{}")));
  REQUIRE(client.StartStream());
  auto writer = server.WaitForPending();
  REQUIRE(writer != nullptr);
  writer->WriteEvent("one");
  REQUIRE(client.ReadChunks([](const std::vector<std::string>& chunks) { return chunks.size() == 1; }));
  client.Close();
  CHECK(WaitUntil([&] { return server.gone == 1; }, absl::Seconds(5)));
  // Writes after that are dropped, and the callback does not fire again.
  writer->WriteEvent("two");
  writer->EndEventStream();
  absl::SleepFor(absl::Milliseconds(50));
  CHECK(server.gone == 1);

  // A callback set after the client left runs at once.
  std::atomic<bool> late{false};
  writer->OnClientGone([&] { late = true; });
  CHECK(WaitUntil([&] { return late.load(); }, absl::Seconds(5)));
}

TEST_CASE("http server: a client leaving while its handler works fires OnClientGone", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  REQUIRE(client.Write(RawRequest("GET", "/pending")));
  REQUIRE(server.WaitForPending() != nullptr);
  absl::SleepFor(absl::Milliseconds(20));
  CHECK(server.gone == 0);
  client.Close();
  CHECK(WaitUntil([&] { return server.gone == 1; }, absl::Seconds(5)));
}

TEST_CASE("http server: a handler may answer later from another thread", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  auto response = client.RoundTrip(RawRequest("GET", "/later"));
  REQUIRE(response);
  CHECK(response->result_int() == 200);
  CHECK(response->body() == "later");
  // And a request sent while the previous one is still being handled waits its turn.
  REQUIRE(client.Write(RawRequest("GET", "/later") + RawRequest("GET", "/hello")));
  auto first = client.Read();
  auto second = client.Read();
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->body() == "later");
  CHECK(second->body() == "hello");
}

TEST_CASE("http server: a handler that throws gets 500", "[unit][http]") {
  TestServer server;
  HttpTestClient client(server.port);
  auto response = client.RoundTrip(RawRequest("GET", "/throws"));
  REQUIRE(response);
  CHECK(response->result_int() == 500);
  CHECK(ErrorOf(*response)["type"] == "server_error");
}

TEST_CASE("http server: 32 concurrent connections are all answered", "[unit][http]") {
  TestServer server;
  std::vector<std::unique_ptr<HttpTestClient>> clients;
  for (int i = 0; i < 32; ++i) {
    clients.push_back(std::make_unique<HttpTestClient>(server.port));
    REQUIRE(clients.back()->connected());
  }
  // All requests are in flight before any answer is read.
  for (int i = 0; i < 32; ++i) {
    REQUIRE(clients[i]->Write(RawRequest("POST", "/echo", {}, "client " + std::to_string(i))));
  }
  for (int i = 0; i < 32; ++i) {
    auto response = clients[i]->Read();
    REQUIRE(response);
    CHECK(response->body() == "client " + std::to_string(i));
  }
}

TEST_CASE("http server: an idle keep-alive connection is closed after the idle timeout", "[unit][http]") {
  HttpServerOptions options = SmallOptions();
  options.idle_timeout = absl::Milliseconds(200);
  TestServer server(options);
  HttpTestClient client(server.port);
  auto response = client.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(response);
  const absl::Time start = absl::Now();
  CHECK(client.PeerCloses(absl::Seconds(5)));
  CHECK(absl::Now() - start >= absl::Milliseconds(150));

  // A request that stalls half-way gets 408 after the read timeout.
  HttpServerOptions slow = SmallOptions();
  slow.read_timeout = absl::Milliseconds(200);
  TestServer slow_server(slow);
  HttpTestClient stalled(slow_server.port);
  REQUIRE(stalled.Write("GET /hello HTTP/1.1\r\nHost: x\r\n"));
  auto timed_out = stalled.Read();
  REQUIRE(timed_out);
  CHECK(timed_out->result_int() == 408);
}

TEST_CASE("http server: the observer sees connections and requests by route and status", "[unit][http]") {
  auto observer = std::make_shared<CountingObserver>();
  {
    TestServer server(SmallOptions(), observer);
    HttpTestClient client(server.port);
    REQUIRE(client.RoundTrip(RawRequest("GET", "/hello")));
    REQUIRE(client.RoundTrip(RawRequest("GET", "/v1/secret-path-123")));
    REQUIRE(client.RoundTrip(RawRequest("BREW", "/hello")));
    client.Close();
    CHECK(WaitUntil([&] { return observer->closed == 1; }, absl::Seconds(5)));
  }
  CHECK(observer->opened == 1);
  CHECK(observer->Requests() == std::vector<std::string>{"GET /hello 200", "GET  404", "OTHER /hello 405"});
}

TEST_CASE("http server: Stop closes connections, tells working handlers, and refuses writers", "[unit][http]") {
  auto server = std::make_unique<TestServer>();
  HttpTestClient client(server->port);
  REQUIRE(client.Write(RawRequest("GET", "/pending")));
  auto writer = server->WaitForPending();
  REQUIRE(writer != nullptr);
  server->server.Stop();
  CHECK(server->gone == 1);
  CHECK(client.PeerCloses(absl::Seconds(5)));
  writer->Send(200, "text/plain", "too late");  // a no-op, not a crash
  server->server.Stop();
  server.reset();
  writer->Send(200, "text/plain", "still a no-op");
}

TEST_CASE("http server: StopAccepting refuses new connections, closes idle ones, lets requests finish with a close",
          "[unit][http]") {
  auto observer = std::make_shared<CountingObserver>();
  TestServer server(SmallOptions(), observer);
  HttpTestClient idle(server.port);
  REQUIRE(idle.RoundTrip(RawRequest("GET", "/hello")));
  HttpTestClient streaming(server.port);
  REQUIRE(streaming.Write(RawRequest("POST", "/stream", {}, "{}")));
  REQUIRE(streaming.StartStream());
  auto writer = server.WaitForPending();
  REQUIRE(writer != nullptr);
  HttpTestClient not_yet_asked(server.port);  // connected, its request still to come
  REQUIRE(WaitUntil([&] { return observer->opened == 3; }, absl::Seconds(5)));

  server.server.StopAccepting();
  CHECK(idle.PeerCloses(absl::Seconds(5)));
  CHECK(WaitUntil([&] { return !HttpTestClient(server.port).connected(); }, absl::Seconds(5)));
  CHECK_FALSE(server.server.WaitForRequests(absl::Now() + absl::Milliseconds(50)));

  // A connection accepted before the drain is served once, and told the connection closes.
  auto late = not_yet_asked.RoundTrip(RawRequest("GET", "/hello"));
  REQUIRE(late);
  CHECK(late->result_int() == 200);
  CHECK((*late)[boost::beast::http::field::connection] == "close");
  CHECK(not_yet_asked.PeerCloses(absl::Seconds(5)));

  // The stream in flight runs to its end, then its connection closes.
  writer->WriteEvent("last");
  writer->EndEventStream();
  streaming.ReadChunks([](const auto&) { return false; });
  CHECK(streaming.StreamComplete());
  CHECK(streaming.chunks() == std::vector<std::string>{"data: last\n\n"});
  CHECK(streaming.PeerCloses(absl::Seconds(5)));
  CHECK(server.server.WaitForRequests(absl::Now() + absl::Seconds(5)));
  CHECK(server.server.requests_in_flight() == 0);
  CHECK(server.gone == 0);
}

TEST_CASE("http server: Start reports a port that cannot be bound", "[unit][http]") {
  TestServer first;
  HttpServer second(SmallOptions());
  auto result = second.Start("127.0.0.1:" + std::to_string(first.port));
  CHECK_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kUnavailable);
  HttpServer third(SmallOptions());
  CHECK_FALSE(third.Start("not an address").ok());
}

}  // namespace
}  // namespace llmc::gateway
