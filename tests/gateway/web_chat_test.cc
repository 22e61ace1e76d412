// Integration test: the browser chat page the gateway serves at /, driven in headless Chromium
// (tests/web/chat_page_test.mjs, puppeteer-core from scripts/fetch-tokenizers.sh, Debian's chromium)
// against the real controller, worker and gateway.
#include <string>

#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

TEST_CASE("web chat: the page at / lists models, streams a reply, stops one, and shows model text as text",
          "[integration][gateway][web]") {
  const std::string api_key = "sk-web-chat";
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(),
                       SmallWorkerArgs(controller.address(), "web-worker", {"--max_model_len=4096"}));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--api_keys=" + api_key, "--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());

  // The page needs no key (it holds no secret); what it calls does.
  const HttpReply page = HttpCall(gateway.port(), "GET", "/");
  REQUIRE(page.status == 200);
  CHECK(page.Header("content-type") == "text/html; charset=utf-8");
  CHECK_THAT(page.Header("content-security-policy"), Catch::Contains("default-src 'none'"));
  CHECK_THAT(page.body, Catch::Contains("<title>llmc chat</title>"));
  for (const char* external : {"src=\"http", "href=\"http", "url(http", "@import", "<link", "src=\"//"}) {
    INFO("the page loads nothing from elsewhere: " << external);
    CHECK(page.body.find(external) == std::string::npos);
  }

  const std::string screenshot = MakeTempDir("llmc-web-chat") + "/chat_page.png";
  const CommandResult result =
      RunCommand("/usr/bin/env",
                 {"node", std::string(LLMC_SOURCE_DIR) + "/tests/web/chat_page_test.mjs", "--url",
                  "http://127.0.0.1:" + std::to_string(gateway.port()) + "/", "--model", kSmallModelName, "--api-key",
                  api_key, "--puppeteer-dir", std::string(LLMC_TOKENIZER_MODULES), "--screenshot", screenshot},
                 absl::Seconds(180));
  INFO("browser test output:\n"
       << result.output
       << "\n(chromium comes from scripts/install-deps.sh, puppeteer-core from "
          "scripts/fetch-tokenizers.sh)");
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("0 failed"));
  CHECK_THAT(result.output, Catch::Contains("PASS c."));  // the stop button
  // Stop aborted the request: the worker freed the sequence rather than generating its 2,000 tokens.
  CHECK(WaitUntil([&] { return ScrapeMetric(worker.metrics_port(), "llmc:num_requests_running") == 0.0; },
                  absl::Seconds(10)));
}

}  // namespace
}  // namespace llmc::testing
