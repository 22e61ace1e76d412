#include "tests/support/cluster_secret.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/internal_auth/cluster_credentials.h"

namespace llmc::testing {

std::vector<std::string> WithTestClusterSecret(std::vector<std::string> environment) {
  const std::string prefix = absl::StrCat(internal_auth::kClusterSecretEnvironmentVariable, "=");
  const bool set = std::any_of(environment.begin(), environment.end(),
                               [&prefix](const std::string& entry) { return absl::StartsWith(entry, prefix); });
  if (!set) environment.push_back(absl::StrCat(prefix, kTestClusterSecret));
  return environment;
}

internal_auth::ClusterCredentials TestClusterCredentials() {
  internal_auth::ClusterCredentials credentials;
  credentials.secret = kTestClusterSecret;
  return credentials;
}

}  // namespace llmc::testing
