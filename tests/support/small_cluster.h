#ifndef LLMC_TESTS_SUPPORT_SMALL_CLUSTER_H_
#define LLMC_TESTS_SUPPORT_SMALL_CLUSTER_H_

// One controller, one worker serving the small package and a gateway in front, on free loopback ports, for
// the integration tests (it names the binaries through the LLMC_*_BINARY definitions of that target).
#include <string>
#include <utility>
#include <vector>

#include "tests/support/catch.h"
#include "tests/support/cluster_secret.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/small_model.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {

// True in the ASan and TSan builds, where tests that only repeat covered paths at length leave them out.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

class SmallCluster {
 public:
  // `controller_flags` go to the controller; the helpers' own gRPC clients use `client_credentials`.
  SmallCluster(const std::string& worker_id, std::vector<std::string> worker_flags,
               std::vector<std::string> gateway_flags, std::vector<std::string> controller_flags = {},
               const internal_auth::ClusterCredentials& client_credentials = TestClusterCredentials())
      : controller_(LLMC_CONTROLLER_BINARY, std::move(controller_flags), /*grpc_port=*/0, {}, client_credentials),
        worker_(LLMC_WORKER_BINARY, SmallModelPackage(),
                SmallWorkerArgs(controller_.address(), worker_id, std::move(worker_flags)), absl::Seconds(120), {},
                client_credentials),
        gateway_(LLMC_GATEWAY_BINARY, controller_.address(), WithRefresh(std::move(gateway_flags))) {
    REQUIRE(gateway_.WaitHealthy());
  }

  ControllerProcess& controller() { return controller_; }
  WorkerProcess& worker() { return worker_; }
  GatewayProcess& gateway() { return gateway_; }
  int port() const { return gateway_.port(); }
  // The gateway's and the worker's logs, for a failure's report.
  std::string Logs() {
    return "gateway log:\n" + gateway_.process().ReadLog() + "\nworker log:\n" + worker_.process().ReadLog();
  }

 private:
  static std::vector<std::string> WithRefresh(std::vector<std::string> flags) {
    flags.push_back("--routing_refresh_interval=200ms");
    return flags;
  }

  ControllerProcess controller_;
  WorkerProcess worker_;
  GatewayProcess gateway_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_SMALL_CLUSTER_H_
