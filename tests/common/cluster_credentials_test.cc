#include "common/internal_auth/cluster_credentials.h"

#include <fstream>

#include "common/config/controller_config.h"
#include "common/internal_auth/internal_call_authenticator.h"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"

namespace llmc::internal_auth {
namespace {

constexpr char kSecret[] = "0123456789abcdef0123";

TEST_CASE("cluster credentials: the secret comes from the config, else its file, else the environment",
          "[unit][auth]") {
  config::InternalAuthConfig config;
  CHECK_FALSE(LoadClusterCredentials(config, nullptr)->authenticated());
  CHECK(LoadClusterCredentials(config, "  from-the-environment-42 \n")->secret == "from-the-environment-42");

  const std::string file = testing::MakeTempDir("llmc-secret") + "/cluster-secret";
  std::ofstream(file) << "from-the-file-0123456789\n";
  config.cluster_secret_file = file;
  CHECK(LoadClusterCredentials(config, "from-the-environment-42")->secret == "from-the-file-0123456789");
  config.cluster_secret_file = file + ".missing";
  CHECK(LoadClusterCredentials(config, nullptr).status().code() == absl::StatusCode::kNotFound);

  config.cluster_secret_file.clear();
  config.cluster_secret = kSecret;
  CHECK(LoadClusterCredentials(config, "from-the-environment-42")->secret == kSecret);
  config.cluster_secret_file = file;
  CHECK_FALSE(config.Validate().ok());
}

TEST_CASE("cluster credentials: short, spaced or non-ASCII secrets are refused", "[unit][auth]") {
  config::InternalAuthConfig config;
  for (const char* secret :
       {"short", "has a space in the middle", "tab\there-0123456789", "caf\xc3\xa9-0123456789abc"}) {
    INFO(secret);
    config.cluster_secret = secret;
    CHECK(LoadClusterCredentials(config, nullptr).status().code() == absl::StatusCode::kInvalidArgument);
  }
  config.cluster_secret = std::string(kMaxClusterSecretBytes + 1, 'x');
  CHECK_FALSE(LoadClusterCredentials(config, nullptr).ok());
}

TEST_CASE("cluster credentials: internal TLS needs all three files, which must be PEM", "[unit][auth]") {
  config::InternalAuthConfig config;
  config.internal_tls.ca_file = "/etc/llmc-tls/ca.crt";
  CHECK_FALSE(config.Validate().ok());
  const std::string dir = testing::MakeTempDir("llmc-tls");
  std::ofstream(dir + "/ca.crt") << "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  std::ofstream(dir + "/key.pem") << "not a key";
  config.internal_tls = {dir + "/ca.crt", dir + "/ca.crt", dir + "/key.pem", "llmc-internal"};
  REQUIRE(config.Validate().ok());
  const absl::Status not_pem = LoadClusterCredentials(config, nullptr).status();
  CHECK(not_pem.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(not_pem.message()), Catch::Contains("key_file"));
}

TEST_CASE("cluster credentials: serving beyond loopback needs a secret, TLS or an explicit opt-out", "[unit][auth]") {
  config::InternalAuthConfig config;
  const ClusterCredentials none;
  CHECK(CheckInternalExposure(none, config, "127.0.0.1:21001").ok());
  CHECK(CheckInternalExposure(none, config, "[::1]:21001").ok());
  CHECK(CheckInternalExposure(none, config, "localhost:0").ok());
  const absl::Status open = CheckInternalExposure(none, config, "0.0.0.0:21001");
  CHECK(open.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(open.message()), Catch::Contains("allow_unauthenticated_internal"));
  ClusterCredentials with_secret;
  with_secret.secret = kSecret;
  CHECK(CheckInternalExposure(with_secret, config, "0.0.0.0:21001").ok());
  config.allow_unauthenticated_internal = true;
  CHECK(CheckInternalExposure(none, config, "10.1.2.3:21001").ok());
}

TEST_CASE("cluster credentials: the calling host is the peer without its port", "[unit][auth]") {
  CHECK(PeerHost("ipv4:10.0.0.7:53211") == "10.0.0.7");
  CHECK(PeerHost("ipv6:[::1]:5000") == "::1");
  CHECK(PeerHost("ipv6:[::ffff:10.0.0.7]:5000") == "10.0.0.7");
  CHECK(PeerHost("ipv6:[fd00::2]:5000") == "fd00::2");
  CHECK(PeerHost("unix:/run/llmc.sock") == "unix:/run/llmc.sock");
}

}  // namespace
}  // namespace llmc::internal_auth
