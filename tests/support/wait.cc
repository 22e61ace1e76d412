#include "tests/support/wait.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <stdexcept>
#include <unordered_set>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace llmc::testing {

double WaitScale() {
  static const double scale = [] {
    const char* value = std::getenv("LLMC_TEST_WAIT_SCALE");
    const double parsed = value == nullptr ? 1.0 : std::atof(value);
    return parsed >= 1.0 && parsed <= 20.0 ? parsed : 1.0;
  }();
  return scale;
}

bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout, absl::Duration poll_interval) {
  const absl::Time deadline = absl::Now() + timeout * WaitScale();
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(poll_interval);
  }
}

namespace {

// Ports below Linux's ephemeral range (32768-60999 by default): the kernel never hands these to outgoing
// connections, so a client socket of a test running in parallel cannot take a port between the pick and the bind.
constexpr int kFirstPickedPort = 10000;
constexpr int kPickedPortCount = 22000;

bool LoopbackPortBinds(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return bound;
}

}  // namespace

int PickFreePort() {
  // Each test process walks its own random sequence and never repeats a port, so parallel test processes
  // rarely try the same one.
  static absl::Mutex mutex(absl::kConstInit);
  static std::mt19937* random = nullptr;
  static std::unordered_set<int>* handed_out = nullptr;
  absl::MutexLock lock(&mutex);
  if (random == nullptr) {
    random = new std::mt19937(static_cast<uint32_t>(::getpid()) * 2654435761u ^
                              static_cast<uint32_t>(absl::ToUnixNanos(absl::Now())));
    handed_out = new std::unordered_set<int>();
  }
  std::uniform_int_distribution<int> pick(kFirstPickedPort, kFirstPickedPort + kPickedPortCount - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = pick(*random);
    if (handed_out->count(port) || !LoopbackPortBinds(port)) continue;
    handed_out->insert(port);
    return port;
  }
  throw std::runtime_error("no free loopback port found in 1,000 tries");
}

bool LoopbackPortAccepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return connected;
}

}  // namespace llmc::testing
