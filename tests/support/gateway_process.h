#ifndef LLMC_TESTS_SUPPORT_GATEWAY_PROCESS_H_
#define LLMC_TESTS_SUPPORT_GATEWAY_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/support/child_process.h"

namespace llmc::testing {

// The real llmc-gateway binary on a free loopback port, pointed at `controller_address`.
class GatewayProcess {
 public:
  // Starts the binary with `extra_args` after the address flags. Throws, with the gateway's log, when its
  // HTTP port does not accept connections within 20 s.
  GatewayProcess(const std::string& binary, const std::string& controller_address,
                 std::vector<std::string> extra_args = {});

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  ChildProcess& process() { return *process_; }

  // GET /health's status code (0 when no answer).
  int HealthStatus();
  // Waits until /health answers 200 (a ready worker is known); false after `timeout`.
  bool WaitHealthy(absl::Duration timeout = absl::Seconds(30));

 private:
  int port_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_GATEWAY_PROCESS_H_
