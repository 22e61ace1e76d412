// Integration tests: what the real llmc-gateway decides before it reads a request's body (route, API key,
// the body budget, 100 Continue), its connection cap, and who it starts serving: keys from the config, a
// file and the environment; no keys beyond loopback only when allowed. No controller or worker is needed:
// every answer here comes before a request is dispatched.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/wait.h"

namespace llmc::testing {
namespace {

constexpr char kNoController[] = "127.0.0.1:1";
constexpr char kKey[] = "sk-admission-test";
constexpr uint64_t kEightMiB = 8 << 20;

// One blocking loopback connection with bounded reads, for requests whose body is never sent.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until `received` holds `until` (the end of a response head, say), the peer closes, or `timeout`.
  std::string ReadUntil(const std::string& until, absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!absl::StrContains(received_, until) && !closed_) {
      if (!ReadOnce(deadline)) break;
    }
    return received_;
  }

  // A whole response with a Content-Length body (as every error answer has).
  std::string ReadResponse(absl::Duration timeout = absl::Seconds(10)) {
    ReadUntil("\r\n\r\n", timeout);
    const size_t head_end = received_.find("\r\n\r\n");
    if (head_end == std::string::npos) return received_;
    const size_t length_at = received_.find("Content-Length: ");
    if (length_at == std::string::npos || length_at > head_end) return received_;
    const size_t length = std::stoul(received_.substr(length_at + 16));
    const absl::Time deadline = absl::Now() + timeout;
    while (received_.size() < head_end + 4 + length && !closed_ && ReadOnce(deadline)) {
    }
    return received_;
  }

  // True when the peer closes (EOF or reset) within `timeout`; what it sent first is kept.
  bool PeerCloses(absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!closed_ && ReadOnce(deadline)) {
    }
    return closed_;
  }

  void Forget() { received_.clear(); }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  // False on timeout.
  bool ReadOnce(absl::Time deadline) {
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) return false;
    pollfd watched{fd_, POLLIN, 0};
    if (::poll(&watched, 1, static_cast<int>(wait_ms)) <= 0) return false;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      closed_ = true;
      return true;
    }
    received_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

std::string Head(const std::string& method, const std::string& target, const std::vector<std::string>& headers) {
  std::string head = absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (const auto& header : headers) absl::StrAppend(&head, header, "\r\n");
  return head + "\r\n";
}

int StatusOf(const std::string& response) {
  if (!absl::StartsWith(response, "HTTP/1.1 ") || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

// The real gateway on a free loopback port with `args` (no controller: nothing here is dispatched).
std::unique_ptr<GatewayProcess> StartGateway(std::vector<std::string> args) {
  return std::make_unique<GatewayProcess>(LLMC_GATEWAY_BINARY, kNoController, std::move(args));
}

TEST_CASE("gateway admission: 401 and 404 come from the header alone, before any body is sent",
          "[integration][gateway]") {
  auto gateway = StartGateway({absl::StrCat("--api_keys=", kKey)});
  struct Case {
    std::string name;
    std::string target;
    std::vector<std::string> headers;
    int status;
    std::string code;
  };
  const std::string length = absl::StrCat("Content-Length: ", kEightMiB);
  const std::vector<Case> cases = {
      {"no key", "/v1/chat/completions", {length, "Content-Type: application/json"}, 401, "invalid_api_key"},
      {"wrong key", "/v1/chat/completions", {length, "Authorization: Bearer sk-wrong"}, 401, "invalid_api_key"},
      {"no key, 100-continue", "/v1/completions", {length, "Expect: 100-continue"}, 401, "invalid_api_key"},
      {"unknown route", "/v1/nothing", {length, absl::StrCat("Authorization: Bearer ", kKey)}, 404, "not_found"},
      {"unknown route, no key", "/v1/nothing", {length}, 404, "not_found"},
      {"over the body limit, no key", "/v1/chat/completions", {"Content-Length: 100000000"}, 401, "invalid_api_key"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    RawConnection connection(gateway->port());
    REQUIRE(connection.connected());
    // Only the header: the 8 MiB body it announces is never sent, so an answer proves it was not awaited.
    REQUIRE(connection.Send(Head("POST", c.target, c.headers)));
    const std::string response = connection.ReadResponse();
    CHECK(StatusOf(response) == c.status);
    CHECK_FALSE(absl::StrContains(response, "100 Continue"));
    CHECK(absl::StrContains(response, "Connection: close\r\n"));
    CHECK(absl::StrContains(response, absl::StrCat("\"code\":\"", c.code, "\"")));
    CHECK(connection.PeerCloses());
  }
}

TEST_CASE("gateway admission: Expect 100-continue is answered once the header passed its checks",
          "[integration][gateway]") {
  auto gateway = StartGateway({absl::StrCat("--api_keys=", kKey)});
  RawConnection connection(gateway->port());
  REQUIRE(connection.connected());
  const std::string body = "{not json";
  REQUIRE(connection.Send(Head("POST", "/v1/chat/completions",
                               {absl::StrCat("Authorization: Bearer ", kKey), "Content-Type: application/json",
                                absl::StrCat("Content-Length: ", body.size()), "Expect: 100-continue"})));
  const std::string interim = connection.ReadUntil("\r\n\r\n");
  REQUIRE(absl::StartsWith(interim, "HTTP/1.1 100 Continue\r\n\r\n"));
  connection.Forget();
  REQUIRE(connection.Send(body));
  // The body was read and parsed: a 400 for its JSON, on a connection kept open.
  const std::string response = connection.ReadResponse();
  CHECK(StatusOf(response) == 400);
  CHECK(absl::StrContains(response, "Connection: keep-alive\r\n"));
}

TEST_CASE("gateway admission: a connection beyond max_connections gets 503 and a close", "[integration][gateway]") {
  constexpr int kMax = 4;
  auto gateway = StartGateway({absl::StrCat("--max_connections=", kMax)});
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < kMax; ++i) {
    // A whole exchange on each: its session is open, and kept open (keep-alive). The start-up probe's
    // connection may still count for a moment: then this one is refused, and tried again.
    const bool opened = WaitUntil(
        [&] {
          auto connection = std::make_unique<RawConnection>(gateway->port());
          if (!connection->Send(Head("GET", "/version", {})) || StatusOf(connection->ReadResponse()) != 200) {
            return false;
          }
          connection->Forget();
          held.push_back(std::move(connection));
          return true;
        },
        absl::Seconds(10), absl::Milliseconds(100));
    REQUIRE(opened);
  }
  {
    RawConnection extra(gateway->port());
    REQUIRE(extra.connected());
    CHECK(extra.PeerCloses());
    const std::string response = extra.ReadResponse(absl::ZeroDuration());
    CHECK(StatusOf(response) == 503);
    CHECK(absl::StrContains(response, "Retry-After: "));
    CHECK(absl::StrContains(response, "Connection: close\r\n"));
    CHECK(absl::StrContains(response, "\"code\":\"too_many_connections\""));
  }
  // The held connections still work; once one closes, a new connection is served.
  REQUIRE(held.front()->Send(Head("GET", "/version", {})));
  CHECK(StatusOf(held.front()->ReadResponse()) == 200);
  held.back()->Close();
  const bool served = WaitUntil(
      [&] {
        RawConnection next(gateway->port());
        return next.Send(Head("GET", "/version", {})) && StatusOf(next.ReadResponse(absl::Seconds(2))) == 200;
      },
      absl::Seconds(10), absl::Milliseconds(100));
  CHECK(served);
}

TEST_CASE("gateway admission: bodies beyond max_inflight_body_bytes get 503 with Retry-After",
          "[integration][gateway]") {
  constexpr uint64_t kBudget = 1 << 20;
  auto gateway = StartGateway({absl::StrCat("--max_body_bytes=", kBudget),
                               absl::StrCat("--max_inflight_body_bytes=", kBudget), "--retry_after_seconds=3"});
  const auto post = [](uint64_t length) {
    return Head("POST", "/v1/chat/completions",
                {"Content-Type: application/json", absl::StrCat("Content-Length: ", length), "Expect: 100-continue"});
  };
  // The first body takes the whole budget while it arrives (its 100 Continue says it was admitted).
  RawConnection first(gateway->port());
  REQUIRE(first.Send(post(kBudget)));
  REQUIRE(absl::StartsWith(first.ReadUntil("\r\n\r\n"), "HTTP/1.1 100 Continue"));
  REQUIRE(first.Send(std::string(1000, ' ')));

  RawConnection second(gateway->port());
  REQUIRE(second.Send(post(1000)));
  const std::string refused = second.ReadResponse();
  CHECK(StatusOf(refused) == 503);
  CHECK(absl::StrContains(refused, "Retry-After: 3\r\n"));
  CHECK(absl::StrContains(refused, "Connection: close\r\n"));
  CHECK(absl::StrContains(refused, "\"code\":\"too_many_request_bodies\""));
  CHECK(second.PeerCloses());

  // When the first client leaves, its share comes back.
  first.Close();
  const bool admitted = WaitUntil(
      [&] {
        RawConnection third(gateway->port());
        return third.Send(post(1000)) &&
               absl::StartsWith(third.ReadUntil("\r\n\r\n", absl::Seconds(2)), "HTTP/1.1 100 Continue");
      },
      absl::Seconds(10), absl::Milliseconds(100));
  CHECK(admitted);
}

// GET /metrics (which needs a key) with `key`: its status.
int MetricsStatus(int port, const std::string& key) {
  RawConnection connection(port);
  if (!connection.Send(Head("GET", "/metrics", {absl::StrCat("Authorization: Bearer ", key)}))) return 0;
  return StatusOf(connection.ReadResponse());
}

TEST_CASE("gateway admission: API keys from the config, a file and LLMC_API_KEYS are all accepted",
          "[integration][gateway]") {
  const std::string dir = MakeTempDir("llmc-api-keys");
  const std::string file = dir + "/api-keys";
  std::ofstream(file) << "# one key per line\nsk-from-file\n\n  sk-padded  \n";
  const int port = PickFreePort();
  ChildProcess gateway(
      LLMC_GATEWAY_BINARY,
      {absl::StrCat("--listen_address=0.0.0.0:", port), std::string("--controller_address=") + kNoController,
       "--api_keys=sk-from-config", "--api_keys_file=" + file},
      dir + "/gateway.log", {"LLMC_API_KEYS=sk-env-one, sk-env-two"});
  REQUIRE(WaitUntil([&] { return !gateway.running() || LoopbackPortAccepts(port); }, absl::Seconds(20)));
  REQUIRE(gateway.running());
  for (const std::string key : {"sk-from-config", "sk-from-file", "sk-padded", "sk-env-one", "sk-env-two"}) {
    INFO(key);
    CHECK(MetricsStatus(port, key) == 200);
  }
  for (const std::string key : {"sk-wrong", "# one key per line", "sk-env-one, sk-env-two"}) {
    INFO(key);
    CHECK(MetricsStatus(port, key) == 401);
  }
}

TEST_CASE("gateway admission: beyond loopback without a key, the gateway starts only when told to",
          "[integration][gateway]") {
  const CommandResult refused = RunCommand(
      LLMC_GATEWAY_BINARY, {"--listen_address=0.0.0.0:0", std::string("--controller_address=") + kNoController});
  CHECK(refused.exit_code == 1);
  CHECK(absl::StrContains(refused.output, "allow_unauthenticated"));

  const CommandResult missing_file = RunCommand(
      LLMC_GATEWAY_BINARY, {"--listen_address=127.0.0.1:0", std::string("--controller_address=") + kNoController,
                            "--api_keys_file=/nonexistent/llmc-api-keys"});
  CHECK(missing_file.exit_code == 1);
  CHECK(absl::StrContains(missing_file.output, "api_keys_file"));

  const std::string dir = MakeTempDir("llmc-unauthenticated");
  const int port = PickFreePort();
  ChildProcess allowed(LLMC_GATEWAY_BINARY,
                       {absl::StrCat("--listen_address=0.0.0.0:", port),
                        std::string("--controller_address=") + kNoController, "--allow_unauthenticated=true"},
                       dir + "/gateway.log");
  REQUIRE(WaitUntil([&] { return !allowed.running() || LoopbackPortAccepts(port); }, absl::Seconds(20)));
  CHECK(allowed.running());
  CHECK(MetricsStatus(port, "anything") == 200);
}

}  // namespace
}  // namespace llmc::testing
