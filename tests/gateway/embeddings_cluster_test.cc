// Integration test: POST /v1/embeddings through the real controller, workers and gateway: every input
// shape, float and base64, order across more inputs than a worker runs at once, last-token and mean
// pooling packages, a package without embeddings, and bad input.
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_http.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/small_model.h"
#include "tests/support/tokenizer_files.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

constexpr char kEmbeddingsKey[] = "sk-embeddings";
const HttpHeaderList kEmbeddingsAuth = {{"Authorization", std::string("Bearer ") + kEmbeddingsKey}};

json PostAuthorizedOk(int port, const std::string& path, const json& body) {
  const HttpReply reply = PostJson(port, path, body.dump(), kEmbeddingsAuth);
  INFO(path << " " << body.dump().substr(0, 300) << " → " << reply.status << " " << reply.body.substr(0, 600));
  REQUIRE(reply.status == 200);
  return json::parse(reply.body);
}

json PostEmbeddingsRefused(int port, const json& body, int status) {
  const HttpReply reply = PostJson(port, "/v1/embeddings", body.dump(), kEmbeddingsAuth);
  INFO(body.dump().substr(0, 300) << " → " << reply.status << " " << reply.body);
  REQUIRE(reply.status == status);
  const json envelope = json::parse(reply.body);
  REQUIRE(envelope.contains("error"));
  CHECK(envelope["error"]["message"].is_string());
  return envelope["error"];
}

int64_t HiddenSize(const std::string& package) {
  json manifest;
  std::ifstream(package + "/llmc-model.json") >> manifest;
  return manifest.at("hidden_size").get<int64_t>();
}

std::vector<float> Vector(const json& item) { return item.at("embedding").get<std::vector<float>>(); }

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// Two runs of the same input in different batches: bf16 activations round alike but not bit for bit.
void CheckSame(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  CHECK(Dot(a, b) > 0.999);
}

TEST_CASE("embeddings: /v1/embeddings through the cluster, every input shape, float and base64, in order",
          "[integration][gateway][embeddings]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  const std::string last_package = SmallModelPackage();
  WorkerProcess last_worker(
      LLMC_WORKER_BINARY, last_package,
      SmallWorkerArgs(controller.address(), "last-worker", {"--max_model_len=" + std::to_string(kShortContext)}));
  WorkerProcess mean_worker(
      LLMC_WORKER_BINARY, SecondSmallModelPackage(),
      SmallWorkerArgs(controller.address(), "mean-worker", {"--max_model_len=" + std::to_string(kShortContext)}));
  // The first package again, exported without embeddings and served under another name.
  const std::string plain_package = MakeTempDir("llmc-no-embeddings") + "/package";
  const CommandResult exported = RunCommand(
      LLMC_PYTHON,
      {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py", "--random", "--preset", "tiny", "--tokenizer",
       TokenizerJsonPath("qwen3"), "--vocab-size", "151936", "--embedding-pooling", "none", "--out", plain_package},
      absl::Seconds(240));
  REQUIRE(exported.exit_code == 0);
  WorkerProcess plain_worker(
      LLMC_WORKER_BINARY, plain_package,
      SmallWorkerArgs(controller.address(), "plain-worker",
                      {"--max_model_len=" + std::to_string(kShortContext), "--model_name=plain"}));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=200ms", std::string("--api_keys=") + kEmbeddingsKey});
  REQUIRE(gateway.WaitHealthy());
  const int port = gateway.port();
  const int64_t width = HiddenSize(last_package);
  REQUIRE(WaitUntil(
      [&] {
        return HttpCall(port, "GET", "/v1/models", "", kEmbeddingsAuth).body.find("\"plain\"") != std::string::npos;
      },
      absl::Seconds(30)));

  const json single =
      PostAuthorizedOk(port, "/v1/embeddings", {{"model", kSmallModelName}, {"input", "The quick brown fox"}});
  CHECK(single["object"] == "list");
  CHECK(single["model"] == kSmallModelName);
  REQUIRE(single["data"].size() == 1);
  CHECK(single["data"][0]["object"] == "embedding");
  CHECK(single["data"][0]["index"] == 0);
  const std::vector<float> fox = Vector(single["data"][0]);
  REQUIRE(static_cast<int64_t>(fox.size()) == width);
  CHECK(std::abs(Dot(fox, fox) - 1.0) < 1e-4);
  const json fox_tokens =
      PostAuthorizedOk(port, "/tokenize", {{"model", kSmallModelName}, {"prompt", "The quick brown fox"}});
  CHECK(single["usage"]["prompt_tokens"] == fox_tokens["count"]);
  CHECK(single["usage"]["total_tokens"] == fox_tokens["count"]);

  // The same text as token ids, and inside a list: the same vector; other texts differ.
  const json by_ids =
      PostAuthorizedOk(port, "/v1/embeddings", {{"model", kSmallModelName}, {"input", fox_tokens["tokens"]}});
  CheckSame(Vector(by_ids["data"][0]), fox);
  const json texts = {"a cat", "The quick brown fox", "jumps over the lazy dog, twice and again"};
  const json listed = PostAuthorizedOk(port, "/v1/embeddings", {{"model", kSmallModelName}, {"input", texts}});
  REQUIRE(listed["data"].size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(listed["data"][i]["index"] == i);
  CheckSame(Vector(listed["data"][1]), fox);
  CHECK(Dot(Vector(listed["data"][0]), fox) < 0.9999);
  CHECK(Dot(Vector(listed["data"][0]), Vector(listed["data"][2])) < 0.9999);
  const json id_lists = PostAuthorizedOk(
      port, "/v1/embeddings", {{"model", kSmallModelName}, {"input", json::array({fox_tokens["tokens"], {7}})}});
  REQUIRE(id_lists["data"].size() == 2);
  CheckSame(Vector(id_lists["data"][0]), fox);
  CHECK(id_lists["usage"]["prompt_tokens"] == fox_tokens["count"].get<int>() + 1);

  // More inputs than a worker runs at once (32): every one comes back, in order.
  json many = json::array();
  for (int i = 0; i < 70; ++i) many.push_back(texts[i % 3]);
  const json answered = PostAuthorizedOk(port, "/v1/embeddings", {{"model", kSmallModelName}, {"input", many}});
  REQUIRE(answered["data"].size() == 70);
  for (int i = 0; i < 70; ++i) {
    INFO("input " << i);
    CHECK(answered["data"][i]["index"] == i);
    CheckSame(Vector(answered["data"][i]), Vector(listed["data"][i % 3]));
  }

  // base64: the little-endian float32 bytes of the same vector.
  const json encoded =
      PostAuthorizedOk(port, "/v1/embeddings",
                       {{"model", kSmallModelName}, {"input", "The quick brown fox"}, {"encoding_format", "base64"}});
  std::string bytes;
  REQUIRE(absl::Base64Unescape(encoded["data"][0]["embedding"].get<std::string>(), &bytes));
  REQUIRE(bytes.size() == fox.size() * sizeof(float));
  std::vector<float> decoded(fox.size());
  std::memcpy(decoded.data(), bytes.data(), bytes.size());
  CheckSame(decoded, fox);

  // The mean-pooling package: its own width-normalized vectors; `dimensions` equal to the size is accepted.
  const json mean =
      PostAuthorizedOk(port, "/v1/embeddings",
                       {{"model", kSecondSmallModelName}, {"input", "The quick brown fox"}, {"dimensions", width}});
  const std::vector<float> mean_fox = Vector(mean["data"][0]);
  CHECK(static_cast<int64_t>(mean_fox.size()) == width);
  CHECK(std::abs(Dot(mean_fox, mean_fox) - 1.0) < 1e-4);

  {
    INFO("a client that leaves cancels the worker call: not every one of 2,048 long inputs is embedded");
    const MetricLabels stopped = {{"finished_reason", "stop"}};
    const double done_before =
        ScrapeMetric(last_worker.metrics_port(), "llmc:request_success_total", stopped).value_or(0);
    json inputs = json::array();
    for (int i = 0; i < 2048; ++i) {
      std::vector<int> ids(250);
      for (int t = 0; t < 250; ++t) ids[t] = 100 + (i * 31 + t * 7) % 5000;
      inputs.push_back(ids);
    }
    const HttpReply gone = PostJson(port, "/v1/embeddings", json{{"model", kSmallModelName}, {"input", inputs}}.dump(),
                                    kEmbeddingsAuth, absl::Milliseconds(800));
    CHECK(gone.status == 0);  // the client gave up and closed the connection
    REQUIRE(WaitUntil(
        [&] {
          return ScrapeMetric(last_worker.metrics_port(), "llmc:num_requests_running") == 0.0 &&
                 ScrapeMetric(last_worker.metrics_port(), "llmc:num_requests_waiting") == 0.0;
        },
        absl::Seconds(60)));
    const double done_after =
        ScrapeMetric(last_worker.metrics_port(), "llmc:request_success_total", stopped).value_or(0);
    CHECK(done_after - done_before < 2048);
  }

  SECTION("bad input is a 4xx naming what is wrong, and the cluster keeps serving") {
    const json model = kSmallModelName;
    CHECK(PostEmbeddingsRefused(port, {{"model", model}}, 400)["param"] == "input");
    CHECK(PostEmbeddingsRefused(port, {{"model", model}, {"input", ""}}, 400)["param"] == "input");
    CHECK(PostEmbeddingsRefused(port, {{"model", model}, {"input", json::array()}}, 400)["param"] == "input");
    CHECK(PostEmbeddingsRefused(port, {{"model", model}, {"input", json::array({"a", 5})}}, 400)["param"] ==
          "input[1]");
    CHECK(PostEmbeddingsRefused(port, {{"model", model}, {"input", 5}}, 400)["param"] == "input");
    CHECK(PostEmbeddingsRefused(port, {{"model", model}, {"input", "x"}, {"encoding_format", "int8"}}, 400)["param"] ==
          "encoding_format");
    CHECK_THAT(PostEmbeddingsRefused(port, {{"model", model}, {"input", "x"}, {"dimensions", 7}}, 400)["message"]
                   .get<std::string>(),
               Catch::Contains("cannot give 7-dimensional"));
    CHECK(PostEmbeddingsRefused(port, {{"model", model}, {"input", json(std::vector<std::string>(2049, "x"))}},
                                400)["param"] == "input");
    CHECK_THAT(PostEmbeddingsRefused(port, {{"model", model}, {"input", json::array({1, 2, 1 << 30})}}, 400)["message"]
                   .get<std::string>(),
               Catch::Contains("outside the vocabulary"));
    CHECK_THAT(PostEmbeddingsRefused(port, {{"model", model}, {"input", std::vector<int>(kShortContext + 1, 9)}},
                                     400)["message"]
                   .get<std::string>(),
               Catch::Contains("maximum context length"));
    CHECK(PostEmbeddingsRefused(port, {{"model", "no-such-model"}, {"input", "x"}}, 404)["code"] == "model_not_found");
    CHECK_THAT(PostEmbeddingsRefused(port, {{"model", "plain"}, {"input", "x"}}, 400)["message"].get<std::string>(),
               Catch::Contains("serves no embeddings"));
    CHECK(PostJson(port, "/v1/embeddings", "{\"input\": ", kEmbeddingsAuth).status == 400);
    CHECK(PostJson(port, "/v1/embeddings", json{{"model", model}, {"input", "x"}}.dump()).status == 401);
    // Still serving.
    CheckSame(Vector(PostAuthorizedOk(port, "/v1/embeddings",
                                      {{"model", model}, {"input", "The quick brown fox"}})["data"][0]),
              fox);
  }
}

}  // namespace
}  // namespace llmc::testing
