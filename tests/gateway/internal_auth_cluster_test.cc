// Integration tests: internal authentication end to end through the real llmc-controller, llmc-worker and
// llmc-gateway: mutual TLS with certificates made here by the openssl command line, and a gateway whose
// cluster secret the others refuse.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config/internal_auth_config.h"
#include "common/internal_auth/cluster_credentials.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_secret.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/grpc_channel.h"
#include "tests/support/http_client.h"
#include "tests/support/http_get.h"
#include "tests/support/small_cluster.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

std::string ShortChatBody() {
  return json{{"model", kSmallModelName},
              {"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})},
              {"max_tokens", 2},
              {"temperature", 0}}
      .dump();
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (const absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A cluster CA and the certificate every process presents (SAN DNS:llmc-internal, for server and client
// use), and a second CA the cluster does not trust with a client certificate of its own.
struct TestCertificates {
  std::string ca, cert, key;          // the cluster's
  std::string rogue_cert, rogue_key;  // signed by the untrusted CA
};

TestCertificates MakeCertificates() {
  const std::string openssl = FindOnPath("openssl");
  if (openssl.empty()) FAIL("the openssl command line is needed (scripts/install-deps.sh installs it)");
  const std::string dir = MakeTempDir("llmc-internal-tls");
  const std::string config = dir + "/openssl.cnf";
  std::ofstream(config) << "[req]\ndistinguished_name = dn\n[dn]\n"
                           "[ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
                           "[leaf]\nbasicConstraints = critical,CA:FALSE\n"
                           "keyUsage = critical,digitalSignature,keyEncipherment\n"
                           "extendedKeyUsage = serverAuth,clientAuth\nsubjectAltName = DNS:llmc-internal\n";
  const auto run = [&](std::vector<std::string> args) {
    const CommandResult result = RunCommand(openssl, args, absl::Seconds(20));
    INFO("openssl " << absl::StrJoin(args, " ") << ":\n" << result.output);
    REQUIRE(result.exit_code == 0);
  };
  const std::vector<std::string> new_key = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  const auto make_ca = [&](const std::string& name) {
    std::vector<std::string> args = {"req", "-x509", "-config", config, "-extensions", "ca", "-days", "2"};
    args.insert(args.end(), new_key.begin(), new_key.end());
    args.insert(args.end(),
                {"-keyout", dir + "/" + name + ".key", "-out", dir + "/" + name + ".pem", "-subj", "/CN=" + name});
    run(args);
  };
  const auto make_leaf = [&](const std::string& name, const std::string& ca) {
    std::vector<std::string> args = {"req", "-new", "-config", config};
    args.insert(args.end(), new_key.begin(), new_key.end());
    args.insert(args.end(), {"-keyout", dir + "/" + name + ".key", "-out", dir + "/" + name + ".csr", "-subj",
                             "/CN=llmc-internal"});
    run(args);
    run({"x509", "-req", "-in", dir + "/" + name + ".csr", "-CA", dir + "/" + ca + ".pem", "-CAkey",
         dir + "/" + ca + ".key", "-set_serial", "2", "-days", "2", "-extfile", config, "-extensions", "leaf", "-out",
         dir + "/" + name + ".pem"});
  };
  make_ca("cluster-ca");
  make_leaf("cluster", "cluster-ca");
  make_ca("rogue-ca");
  make_leaf("rogue", "rogue-ca");
  return {dir + "/cluster-ca.pem", dir + "/cluster.pem", dir + "/cluster.key", dir + "/rogue.pem", dir + "/rogue.key"};
}

// The flags that give a process the cluster certificate (server_name stays llmc-internal).
std::vector<std::string> TlsFlags(const TestCertificates& certs) {
  return {"--internal_tls.ca_file=" + certs.ca, "--internal_tls.cert_file=" + certs.cert,
          "--internal_tls.key_file=" + certs.key};
}

// The test's secret with internal TLS presenting `cert`/`key` ("" for no client certificate), through the
// binaries' own loader.
internal_auth::ClusterCredentials TlsClient(const TestCertificates& certs, const std::string& cert,
                                            const std::string& key) {
  config::InternalAuthConfig config;
  config.cluster_secret = kTestClusterSecret;
  config.internal_tls = {certs.ca, certs.cert, certs.key, "llmc-internal"};
  absl::StatusOr<internal_auth::ClusterCredentials> credentials =
      internal_auth::LoadClusterCredentials(config, nullptr);
  REQUIRE(credentials.ok());
  if (cert.empty()) {
    credentials->tls->cert_pem.clear();
    credentials->tls->key_pem.clear();
  } else {
    std::ifstream cert_file(cert), key_file(key);
    credentials->tls->cert_pem.assign(std::istreambuf_iterator<char>(cert_file), {});
    credentials->tls->key_pem.assign(std::istreambuf_iterator<char>(key_file), {});
  }
  return *credentials;
}

grpc::Status ListWorkers(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListWorkersResponse response;
  return v1::Controller::NewStub(channel)->ListWorkers(&context, v1::ListWorkersRequest(), &response);
}

grpc::Status GetStatus(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetStatusResponse response;
  return v1::Worker::NewStub(channel)->GetStatus(&context, v1::GetStatusRequest(), &response);
}

// A 500 in OpenAI's error shape that blames the gateway's configuration, not the client, and shows no secret.
void CheckInternalAuthError(const HttpReply& reply, const std::string& peer) {
  INFO("status " << reply.status << " " << reply.error << " body: " << reply.body);
  REQUIRE(reply.status == 500);
  const json body = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  REQUIRE(body.contains("error"));
  CHECK(body["error"]["type"] == "server_error");
  CHECK(body["error"]["code"] == "internal_error");
  const std::string message = body["error"]["message"].get<std::string>();
  CHECK_THAT(message, Catch::Contains("could not authenticate to " + peer));
  CHECK_FALSE(absl::StrContains(reply.body, kWrongSecret));
  CHECK_FALSE(absl::StrContains(reply.body, kTestClusterSecret));
}

TEST_CASE(
    "internal auth: the whole path runs over mutual TLS, and the servers refuse clients without the "
    "cluster's certificate",
    "[integration][gateway][auth]") {
  const TestCertificates certs = MakeCertificates();
  const std::vector<std::string> tls = TlsFlags(certs);
  SmallCluster cluster("tls-worker", tls, tls, tls, TlsClient(certs, certs.cert, certs.key));

  const HttpReply chat = PostJson(cluster.port(), "/v1/chat/completions", ShortChatBody(), {}, absl::Seconds(30));
  INFO("status " << chat.status << " " << chat.error << " body: " << chat.body << "\n" << cluster.Logs());
  CHECK(chat.status == 200);

  // The helper's client, with the cluster certificate, reaches both (what the refusals below are set against).
  const std::string controller = cluster.controller().address();
  const std::string worker = cluster.worker().address();
  CHECK(ListWorkers(MakeTestChannel(controller, TlsClient(certs, certs.cert, certs.key))).ok());
  CHECK(GetStatus(MakeTestChannel(worker, TlsClient(certs, certs.cert, certs.key))).ok());

  // The right secret is not enough: without a client certificate, with one of another CA, or in plaintext
  // the handshake fails.
  const std::vector<std::pair<std::string, internal_auth::ClusterCredentials>> refused = {
      {"no client certificate", TlsClient(certs, "", "")},
      {"an untrusted client certificate", TlsClient(certs, certs.rogue_cert, certs.rogue_key)},
      {"plaintext", TestClusterCredentials()}};
  for (const auto& [what, credentials] : refused) {
    INFO(what);
    CHECK(ListWorkers(MakeTestChannel(controller, credentials)).error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK(GetStatus(MakeTestChannel(worker, credentials)).error_code() == grpc::StatusCode::UNAVAILABLE);
  }
}

TEST_CASE("internal auth: a worker refusing the gateway's secret is a 500 naming the gateway, not a 401",
          "[integration][gateway][auth]") {
  // A controller without a secret lets the gateway read the routing table with its wrong one; the worker
  // (with the test secret) refuses its Generate.
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {}, /*grpc_port=*/0,
                               {absl::StrCat(internal_auth::kClusterSecretEnvironmentVariable, "=")});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "auth-worker"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {absl::StrCat("--cluster_secret=", kWrongSecret), "--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy(absl::Seconds(20)));

  const HttpReply chat = PostJson(gateway.port(), "/v1/chat/completions", ShortChatBody(), {}, absl::Seconds(30));
  CheckInternalAuthError(chat, "a worker");
  const std::string log = gateway.process().ReadLog();
  CHECK_THAT(log, Catch::Contains("internal authentication failed: worker auth-worker refused"));
  CHECK_FALSE(absl::StrContains(log, kWrongSecret));
}

TEST_CASE("internal auth: a gateway the controller refuses is not ready and answers 500, never 401 or 404",
          "[integration][gateway][auth]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {absl::StrCat("--cluster_secret=", kWrongSecret), "--routing_refresh_interval=200ms"});

  CHECK(WaitUntil([&] { return HttpGet("127.0.0.1", gateway.port(), "/ready").status == 503; }, absl::Seconds(10)));
  CHECK(gateway.HealthStatus() == 503);
  CheckInternalAuthError(PostJson(gateway.port(), "/v1/chat/completions", ShortChatBody(), {}, absl::Seconds(30)),
                         "the controller");
  CheckInternalAuthError(HttpCall(gateway.port(), "GET", "/v1/models", "", {}, absl::Seconds(30)), "the controller");

  const std::string log = gateway.process().ReadLog();
  INFO(log);
  // The refused routing watch is logged once, though it is retried every 200 ms.
  const std::string watch = "the controller (watching the routing table) refused";
  CHECK(absl::StrContains(log, watch));
  CHECK(log.find(watch) == log.rfind(watch));
}

}  // namespace
}  // namespace llmc::testing
