// The metrics endpoint's accept loop when the process runs out of file descriptors.
#include "common/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "tests/support/catch.h"
#include "tests/support/wait.h"

namespace llmc {
namespace {

TEST_CASE("metrics server: out of file descriptors, it pauses between failed accepts instead of spinning",
          "[unit][metrics]") {
  MetricsHttpServer server(std::make_shared<prometheus::Registry>());
  auto address = server.Start("127.0.0.1:0");
  REQUIRE(address.ok());

  const int client = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(client >= 0);
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(address->port));
  target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  // No descriptor is left for the server's accept: the limit sits at the lowest free one. The connection
  // itself completes in the kernel's backlog, and every accept of it fails with EMFILE.
  rlimit original{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &original) == 0);
  const int lowest_free = dup(client);
  REQUIRE(lowest_free >= 0);
  close(lowest_free);
  rlimit lowered = original;
  lowered.rlim_cur = static_cast<rlim_t>(lowest_free);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  const int connected = connect(client, reinterpret_cast<const sockaddr*>(&target), sizeof(target));
  absl::SleepFor(absl::Milliseconds(500));
  const int64_t failures = server.failed_accepts();
  REQUIRE(setrlimit(RLIMIT_NOFILE, &original) == 0);
  REQUIRE(connected == 0);

  // About one failed accept per 100 ms pause; a loop that retries at once fails thousands of times.
  INFO("failed accepts in 500 ms: " << failures);
  CHECK(failures >= 1);
  CHECK(failures <= 50);

  // With descriptors back, the queued connection is served.
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  REQUIRE(send(client, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string reply;
  char buffer[512];
  for (int reads = 0; reads < 100; ++reads) {
    const ssize_t n = recv(client, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  close(client);
  CHECK(reply.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(reply.find("ok") != std::string::npos);
}

}  // namespace
}  // namespace llmc
