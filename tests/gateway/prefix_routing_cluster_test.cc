// Integration test: with two workers and a workload whose requests share long prefixes, the controller's
// prefix_aware policy sends each prefix where it was computed before, so the workers' prefix caches serve
// more of the prompts (usage.prompt_tokens_details.cached_tokens) than with lottery. Real controller,
// workers and gateway as separate processes on loopback.
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

struct WorkloadResult {
  int64_t cached_tokens = 0;
  int64_t prompt_tokens = 0;
};

// Four "documents" of about 2,400 characters, each asked six different questions one after another.
WorkloadResult RunSharedPrefixWorkload(const std::string& policy) {
  // Heartbeats every 100 ms, as prefix_aware wants them (docs/dispatch.md): fresh queues, and picks counted
  // since the last one do not pile up over a sequence of requests.
  ControllerProcess controller(LLMC_CONTROLLER_BINARY,
                               {"--dispatch_policy=" + policy, "--dispatch_seed=7", "--heartbeat_interval=100ms"});
  WorkerProcess first(LLMC_WORKER_BINARY, SmallModelPackage(),
                      SmallWorkerArgs(controller.address(), "prefix-a", {"--max_model_len=2048"}));
  WorkerProcess second(LLMC_WORKER_BINARY, SmallModelPackage(),
                       SmallWorkerArgs(controller.address(), "prefix-b", {"--max_model_len=2048"}));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 2; }, absl::Seconds(60)));
  REQUIRE(gateway.WaitHealthy());
  WorkloadResult result;
  for (int question = 0; question < 6; ++question) {
    for (int document = 0; document < 4; ++document) {
      std::string prompt = "Document " + std::to_string(document) + ":";
      for (int sentence = 0; sentence < 48; ++sentence) {
        prompt +=
            " Sentence " + std::to_string(sentence) + " of document " + std::to_string(document) + " says something.";
      }
      prompt += " Question " + std::to_string(question) + ": what does it say?";
      // A user's pause: the next heartbeats (every 100 ms) show the workers as they are now, idle.
      absl::SleepFor(absl::Milliseconds(250));
      const json body = {{"model", kSmallModelName}, {"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
      const HttpReply reply = PostJson(gateway.port(), "/v1/completions", body.dump());
      INFO(reply.body);
      REQUIRE(reply.status == 200);
      const json usage = json::parse(reply.body)["usage"];
      result.prompt_tokens += usage["prompt_tokens"].get<int64_t>();
      if (usage.contains("prompt_tokens_details")) {
        result.cached_tokens += usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
      }
    }
  }
  // The workers count the same hits.
  const double hits = ScrapeMetric(first.metrics_port(), "llmc:prefix_cache_hits_total").value_or(-1) +
                      ScrapeMetric(second.metrics_port(), "llmc:prefix_cache_hits_total").value_or(-1);
  CHECK(hits == static_cast<double>(result.cached_tokens));
  // Each worker that computed prompts tells the controller how fast, for prefix_aware's queue estimate.
  const std::pair<const WorkerProcess*, std::string> workers[] = {{&first, "prefix-a"}, {&second, "prefix-b"}};
  for (const auto& [worker, id] : workers) {
    if (ScrapeMetric(worker->metrics_port(), "llmc:prefix_cache_queries_total").value_or(0) <= 0) continue;
    INFO("worker " << id);
    CHECK(WaitUntil(
        [&, id = id] {
          for (const v1::WorkerInfo& info : controller.ListWorkers()) {
            if (info.worker_id() == id) return info.load().prefill_tokens_per_second() > 0;
          }
          return false;
        },
        absl::Seconds(10)));
  }
  return result;
}

TEST_CASE("prefix routing: prefix_aware serves more prompt tokens from the workers' caches than lottery",
          "[integration][gateway][prefix_cache]") {
  const WorkloadResult lottery = RunSharedPrefixWorkload("lottery");
  const WorkloadResult prefix_aware = RunSharedPrefixWorkload("prefix_aware");
  INFO("cached tokens: lottery " << lottery.cached_tokens << ", prefix_aware " << prefix_aware.cached_tokens << " of "
                                 << prefix_aware.prompt_tokens);
  CHECK(prefix_aware.prompt_tokens == lottery.prompt_tokens);
  CHECK(prefix_aware.cached_tokens > lottery.cached_tokens);
  // Each document is computed once; its other 5 questions find it cached (all but the partial last block
  // and the question).
  CHECK(prefix_aware.cached_tokens >= prefix_aware.prompt_tokens * 5 / 6 * 6 / 10);
}

TEST_CASE("prefix cache: salts per request and per API key keep cached prompts apart through the processes",
          "[integration][gateway][prefix_cache]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(),
                       SmallWorkerArgs(controller.address(), "salted", {"--max_model_len=2048"}));
  GatewayProcess gateway(
      LLMC_GATEWAY_BINARY, controller.address(),
      {"--routing_refresh_interval=200ms", "--api_keys=key-a,key-b", "--cache_salt_per_api_key=true"});
  REQUIRE(WaitUntil([&] { return controller.ListWorkers().size() == 1; }, absl::Seconds(60)));
  REQUIRE(gateway.WaitHealthy());
  std::string prompt = "A shared document:";
  for (int sentence = 0; sentence < 24; ++sentence)
    prompt += " Sentence " + std::to_string(sentence) + " says a thing.";
  // The cached prompt tokens of one request made with `key` and, when not empty, `salt`.
  const auto cached = [&](const std::string& key, const std::string& salt) -> int64_t {
    json body = {{"model", kSmallModelName}, {"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
    if (!salt.empty()) body["cache_salt"] = salt;
    const HttpReply reply =
        PostJson(gateway.port(), "/v1/completions", body.dump(), {{"Authorization", "Bearer " + key}});
    INFO(reply.body);
    REQUIRE(reply.status == 200);
    const json usage = json::parse(reply.body)["usage"];
    return usage.contains("prompt_tokens_details") ? usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>() : 0;
  };
  CHECK(cached("key-a", "") == 0);
  CHECK(cached("key-a", "") > 0);     // the same key: its own prompt is cached
  CHECK(cached("key-b", "") == 0);    // another key learns nothing of it
  CHECK(cached("key-a", "s1") == 0);  // another salt under the same key
  CHECK(cached("key-a", "s1") > 0);
  CHECK(cached("key-a", "s2") == 0);
  CHECK(cached("key-b", "s1") == 0);  // the same salt under another key
  const HttpReply wrong = PostJson(gateway.port(), "/v1/completions",
                                   json({{"model", kSmallModelName}, {"prompt", "x"}, {"cache_salt", 1}}).dump(),
                                   {{"Authorization", "Bearer key-a"}});
  CHECK(wrong.status == 400);
  CHECK_THAT(wrong.body, Catch::Contains("cache_salt"));
}

}  // namespace
}  // namespace llmc::testing
