#include "tests/support/gateway_process.h"

#include <stdexcept>

#include "tests/support/cluster_secret.h"
#include "tests/support/http_get.h"
#include "tests/support/wait.h"

namespace llmc::testing {

GatewayProcess::GatewayProcess(const std::string& binary, const std::string& controller_address,
                               std::vector<std::string> extra_args)
    : port_(PickFreePort()) {
  std::vector<std::string> args = {"--listen_address=127.0.0.1:" + std::to_string(port_),
                                   "--controller_address=" + controller_address};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const std::string log = MakeTempDir("llmc-gateway") + "/gateway.log";
  process_ = std::make_unique<ChildProcess>(binary, args, log, WithTestClusterSecret({}));
  const bool listening =
      WaitUntil([&] { return !process_->running() || LoopbackPortAccepts(port_); }, absl::Seconds(20));
  if (!listening || !process_->running()) {
    throw std::runtime_error("llmc-gateway did not start listening; its log:\n" + process_->ReadLog());
  }
}

int GatewayProcess::HealthStatus() { return HttpGet("127.0.0.1", port_, "/health").status; }

bool GatewayProcess::WaitHealthy(absl::Duration timeout) {
  return WaitUntil([&] { return HealthStatus() == 200; }, timeout, absl::Milliseconds(50));
}

}  // namespace llmc::testing
