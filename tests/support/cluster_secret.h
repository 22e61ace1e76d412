#ifndef LLMC_TESTS_SUPPORT_CLUSTER_SECRET_H_
#define LLMC_TESTS_SUPPORT_CLUSTER_SECRET_H_

#include <string>
#include <vector>

#include "common/internal_auth/cluster_credentials.h"

namespace llmc::testing {

// The cluster secret every real process the helpers start gets (ControllerProcess, WorkerProcess,
// GatewayProcess: LLMC_CLUSTER_SECRET) and every test channel carries (MakeTestChannel), so that integration
// tests run the authenticated path the manifests and scripts/local-cluster.sh set up.
inline constexpr char kTestClusterSecret[] = "llmc-test-cluster-secret-2f6c1e0b9a";

// A secret that is not the cluster's, for calls that must be refused.
inline constexpr char kWrongSecret[] = "not-the-cluster-secret-0000000000";

// `environment` (NAME=VALUE entries) with LLMC_CLUSTER_SECRET set to kTestClusterSecret, unless it sets the
// variable itself.
std::vector<std::string> WithTestClusterSecret(std::vector<std::string> environment);

// Credentials carrying kTestClusterSecret, for in-process clients (a WorkerRouter) of the real processes.
internal_auth::ClusterCredentials TestClusterCredentials();

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CLUSTER_SECRET_H_
