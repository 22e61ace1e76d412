// What the gateway adds: time to first token and inter-token latency of the same greedy completions sent
// straight to a worker over gRPC and through the gateway over HTTP/SSE, interleaved one request at a time so
// both paths see the same worker state. Prints percentiles and the differences; judges nothing.
// The gateway is measured twice: over one kept-alive connection, as SDK clients (with their connection
// pools) and the direct gRPC channel work, and with a new connection per request.
//
//   llmc_gateway_bench <gateway-port> <worker-host:port> <model> [requests] [max_tokens]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "llmc/v1/worker.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/http_client.h"

namespace {

struct Timings {
  std::vector<double> ttft_ms, itl_ms;
};

std::string Prompt(int request) { return absl::StrCat("Request ", request, ": tell me about the sea and the sky."); }

nlohmann::json GatewayBody(const std::string& model, int request, int max_tokens) {
  return {{"model", model},   {"prompt", Prompt(request)}, {"max_tokens", max_tokens},
          {"temperature", 0}, {"ignore_eos", true},        {"stream", true}};
}

// Records the first token's time from `start` and the gaps between later ones.
class TokenClock {
 public:
  TokenClock(absl::Time start, Timings& out) : last_(start), out_(out) {}
  void Token() {
    const absl::Time now = absl::Now();
    (first_ ? out_.ttft_ms : out_.itl_ms).push_back(absl::ToDoubleMilliseconds(now - last_));
    first_ = false;
    last_ = now;
  }

 private:
  bool first_ = true;
  absl::Time last_;
  Timings& out_;
};

bool IsTokenChunk(const std::string& data) {
  if (data == "[DONE]") return false;
  const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, false);
  return chunk.is_object() && !chunk["choices"].empty();  // not the usage chunk
}

bool RunDirect(llmc::v1::Worker::Stub& stub, const std::string& model, int request, int max_tokens, Timings& out) {
  llmc::v1::GenerateRequest generate;
  generate.set_model(model);
  generate.set_prompt(Prompt(request));
  generate.mutable_sampling()->set_temperature(0);
  generate.mutable_sampling()->set_max_tokens(max_tokens);
  generate.mutable_sampling()->set_ignore_eos(true);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  TokenClock clock(absl::Now(), out);
  auto reader = stub.Generate(&context, generate);
  llmc::v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.deltas_size() > 0) clock.Token();
  }
  return reader->Finish().ok();
}

bool RunGateway(int port, const std::string& model, int request, int max_tokens, Timings& out) {
  const std::string body = GatewayBody(model, request, max_tokens).dump();
  TokenClock clock(absl::Now(), out);
  llmc::testing::SseClient client(port, "/v1/completions", body);
  if (client.status() != 200) return false;
  while (auto event = client.NextEvent(absl::Seconds(120))) {
    if (*event == "[DONE]") break;
    if (IsTokenChunk(*event)) clock.Token();
  }
  return !client.failed();
}

// One HTTP/1.1 connection to the gateway, kept alive across requests. Blocking reads, each bounded by
// SO_RCVTIMEO; the chunked SSE body is de-chunked as it arrives.
class KeepAliveClient {
 public:
  explicit KeepAliveClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const timeval timeout{120, 0};
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) Close();
  }
  ~KeepAliveClient() { Close(); }

  // Sends a streaming POST and calls `on_event` with each SSE event's data until the response ends.
  // False on any failure (the connection is then closed).
  template <typename OnEvent>
  bool Stream(int port, const std::string& target, const std::string& body, OnEvent on_event) {
    if (fd_ < 0) return false;
    const std::string request = absl::StrCat("POST ", target, " HTTP/1.1\r\nHost: 127.0.0.1:", port,
                                             "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
                                             "Content-Length: ",
                                             body.size(), "\r\n\r\n", body);
    if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) return Fail();
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos) {
      if (!Receive(head)) return Fail();
    }
    const size_t head_end = head.find("\r\n\r\n") + 4;
    if (head.compare(0, 12, "HTTP/1.1 200") != 0) return Fail();
    raw_ = head.substr(head_end);
    std::string events;
    while (true) {
      // De-chunk what has arrived: "<hex size>\r\n<data>\r\n", ending with a zero-size chunk.
      while (true) {
        const size_t line_end = raw_.find("\r\n");
        if (line_end == std::string::npos) break;
        size_t size = 0;
        const char* line = raw_.data();
        if (std::from_chars(line, line + line_end, size, 16).ec != std::errc()) return Fail();
        if (size == 0) {
          if (raw_.size() < line_end + 4) break;
          raw_.erase(0, line_end + 4);
          return true;
        }
        if (raw_.size() < line_end + 2 + size + 2) break;
        events.append(raw_, line_end + 2, size);
        raw_.erase(0, line_end + 2 + size + 2);
      }
      for (size_t end; (end = events.find("\n\n")) != std::string::npos; events.erase(0, end + 2)) {
        const std::string event = events.substr(0, end);
        if (event.rfind("data: ", 0) == 0) on_event(event.substr(6));
      }
      if (!Receive(raw_)) return Fail();
    }
  }

 private:
  bool Receive(std::string& into) {
    char buffer[16384];
    const ssize_t got = recv(fd_, buffer, sizeof(buffer), 0);
    if (got <= 0) return false;
    into.append(buffer, static_cast<size_t>(got));
    return true;
  }
  bool Fail() {
    Close();
    return false;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;
  std::string raw_;
};

bool RunGatewayKeptAlive(KeepAliveClient& client, int port, const std::string& model, int request, int max_tokens,
                         Timings& out) {
  const std::string body = GatewayBody(model, request, max_tokens).dump();
  TokenClock clock(absl::Now(), out);
  return client.Stream(port, "/v1/completions", body, [&](const std::string& data) {
    if (IsTokenChunk(data)) clock.Token();
  });
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <gateway-port> <worker-host:port> <model> [requests] [max_tokens]\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string model = argv[3];
  const int requests = argc > 4 ? std::atoi(argv[4]) : 40;
  const int max_tokens = argc > 5 ? std::atoi(argv[5]) : 32;
  auto stub = llmc::v1::Worker::NewStub(grpc::CreateChannel(argv[2], grpc::InsecureChannelCredentials()));
  KeepAliveClient kept_alive(port);
  Timings direct, gateway, fresh;
  for (int request = 0; request < requests + 2; ++request) {
    Timings warm_direct, warm_gateway, warm_fresh;
    const bool warm = request < 2;  // the first requests warm connections and caches up
    if (!RunDirect(*stub, model, request, max_tokens, warm ? warm_direct : direct) ||
        !RunGatewayKeptAlive(kept_alive, port, model, request, max_tokens, warm ? warm_gateway : gateway) ||
        !RunGateway(port, model, request, max_tokens, warm ? warm_fresh : fresh)) {
      std::fprintf(stderr, "request %d failed\n", request);
      return 1;
    }
  }
  std::printf("%d requests each way, %d tokens each, one at a time (interleaved)\n", requests, max_tokens);
  std::printf("gateway: one kept-alive HTTP connection; new conn.: a new connection per request\n");
  std::printf("%-26s %10s %10s %10s %10s %10s\n", "", "direct", "gateway", "added", "new conn.", "added");
  const auto row = [](const char* label, const std::vector<double>& a, const std::vector<double>& b,
                      const std::vector<double>& c, double p) {
    const double x = Percentile(a, p), y = Percentile(b, p), z = Percentile(c, p);
    std::printf("%-26s %10.3f %10.3f %10.3f %10.3f %10.3f\n", label, x, y, y - x, z, z - x);
  };
  row("TTFT p50 (ms)", direct.ttft_ms, gateway.ttft_ms, fresh.ttft_ms, 0.5);
  row("TTFT p90 (ms)", direct.ttft_ms, gateway.ttft_ms, fresh.ttft_ms, 0.9);
  row("inter-token p50 (ms)", direct.itl_ms, gateway.itl_ms, fresh.itl_ms, 0.5);
  row("inter-token p90 (ms)", direct.itl_ms, gateway.itl_ms, fresh.itl_ms, 0.9);
  return 0;
}
