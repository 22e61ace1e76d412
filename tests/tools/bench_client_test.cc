// llmc-bench measures what a server does: against a scripted fake OpenAI streaming server with known
// delays (first chunk after 200 ms, then one every 50 ms), the reported TTFT, ITL and TPOT match the
// script within tolerance, counts are exact, and refusals, stream errors and timeouts count as failures.
// Timing bounds are loose on purpose (a shared 2-core machine); the medians are what is checked.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/tools/scripted_openai_server.h"
#include "tools/bench/arrivals.h"
#include "tools/bench/bench_cli.h"
#include "tools/bench/bench_metrics.h"
#include "tools/bench/load_runner.h"
#include "tools/bench/prompt_dataset.h"

namespace llmc::testing {
namespace {

using bench::BenchMetrics;
using bench::RunLoad;
using bench::RunnerOptions;
using nlohmann::json;

RunnerOptions OptionsFor(const ScriptedOpenAiServer& server, const std::string& model, bool chat = true) {
  RunnerOptions options;
  options.url = *bench::ParseBaseUrl(server.base_url());
  options.path = bench::EndpointPath(options.url, chat ? "chat" : "completions");
  options.model = model;
  options.chat = chat;
  options.ignore_eos = true;
  options.request_timeout = absl::Seconds(20);
  options.max_duration = absl::Seconds(60);
  return options;
}

std::vector<bench::BenchPrompt> Prompts(int count, int output_len = 10) {
  bench::RandomDatasetOptions options;
  options.num_prompts = count;
  options.input_len = 32;
  options.output_len = output_len;
  options.seed = 7;
  options.run_id = 1234;
  return bench::MakeRandomPrompts(options);
}

std::string FirstWords(const std::string& text, int count) {
  std::vector<std::string> words = absl::StrSplit(text, ' ');
  words.resize(static_cast<size_t>(count));
  return absl::StrJoin(words, " ");
}

TEST_CASE("llmc-bench reports the scripted TTFT, ITL and TPOT of a streaming server", "[integration]") {
  ScriptedOpenAiServer server;
  const bool chat = GENERATE(true, false);
  INFO((chat ? "chat" : "completions"));
  RunnerOptions options = OptionsFor(server, "scripted", chat);
  options.max_concurrency = 4;
  const auto prompts = Prompts(8);
  auto run = RunLoad(options, prompts, bench::ArrivalTimes(8, INFINITY, 1.0, 0));
  REQUIRE(run.ok());
  const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
  for (const auto& result : run->results) INFO(result.error_kind << ": " << result.error);

  // Counts and token accounting are exact.
  CHECK(metrics.completed == 8);
  CHECK(metrics.failed == 0);
  CHECK(metrics.total_output_tokens == 80);  // from usage.completion_tokens
  CHECK(metrics.usage_reported == 8);
  CHECK(metrics.total_input_tokens == 8 * 17);  // usage.prompt_tokens replaces the estimate
  CHECK(metrics.itl_ms.count == 8 * 9);
  CHECK(metrics.tpot_ms.count == 8);
  CHECK(metrics.request_throughput == Approx(8.0 / run->duration_s));
  CHECK(metrics.output_throughput == Approx(80.0 / run->duration_s));
  CHECK(metrics.total_token_throughput == Approx((80.0 + 8 * 17) / run->duration_s));

  // Timings match the script: TTFT 200 ms, one token every 50 ms.
  CHECK(metrics.ttft_ms.median == Approx(200).margin(30));
  CHECK(metrics.ttft_ms.median >= 199);
  CHECK(metrics.itl_ms.median == Approx(50).margin(15));
  CHECK(metrics.tpot_ms.median == Approx(50).margin(15));
  CHECK(metrics.e2el_ms.median == Approx(650).margin(60));
  // Two waves of four requests of ~650 ms each.
  CHECK(run->duration_s > 1.25);
  CHECK(run->duration_s < 3.0);

  // What went over the wire: streaming with usage, ignore_eos, max_tokens, unique prompt prefixes, and
  // keep-alive connections reused by the second wave.
  const auto bodies = server.bodies();
  REQUIRE(bodies.size() == 8);
  std::set<std::string> prefixes;
  for (const json& body : bodies) {
    CHECK(body["stream"] == true);
    CHECK(body["stream_options"]["include_usage"] == true);
    CHECK(body["ignore_eos"] == true);
    CHECK(body["max_tokens"] == 10);
    const std::string prompt =
        chat ? body["messages"][0]["content"].get<std::string>() : body["prompt"].get<std::string>();
    prefixes.insert(FirstWords(prompt, bench::kUniquePrefixWords));
  }
  CHECK(prefixes.size() == 8);
  CHECK(server.connections_opened() <= 4);
}

TEST_CASE("llmc-bench counts output tokens from chunks when the server reports no usage", "[integration]") {
  ScriptedOpenAiServer server({absl::Milliseconds(50), absl::Milliseconds(20), 6});
  auto run = RunLoad(OptionsFor(server, "no-usage"), Prompts(3), {0, 0, 0});
  REQUIRE(run.ok());
  const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
  CHECK(metrics.completed == 3);
  CHECK(metrics.usage_reported == 0);
  CHECK(metrics.total_output_tokens == 18);
  // Without usage the prompt length is the dataset's estimate: 32 words.
  CHECK(metrics.total_input_tokens == 3 * 32);
  CHECK(metrics.itl_ms.median == Approx(20).margin(12));
}

TEST_CASE("llmc-bench counts 429 and 500 answers as failures", "[integration]") {
  ScriptedOpenAiServer server({absl::Milliseconds(20), absl::Milliseconds(10), 3});
  SECTION("every request refused") {
    RunnerOptions options = OptionsFor(server, "fail-429");
    options.max_concurrency = 2;
    auto run = RunLoad(options, Prompts(5), std::vector<double>(5, 0.0));
    REQUIRE(run.ok());
    const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
    CHECK(metrics.completed == 0);
    CHECK(metrics.failed == 5);
    REQUIRE(metrics.errors.count("HTTP 429") == 1);
    CHECK(metrics.errors.at("HTTP 429").count == 5);
    CHECK(metrics.errors.at("HTTP 429").example == "HTTP 429: queue full");
    CHECK(metrics.request_throughput == 0);
    CHECK(run->results[0].http_status == 429);
  }
  SECTION("every other request fails with 500") {
    RunnerOptions options = OptionsFor(server, "alternate");
    options.max_concurrency = 1;  // one at a time, so the server's numbering is the request order
    auto run = RunLoad(options, Prompts(6), std::vector<double>(6, 0.0));
    REQUIRE(run.ok());
    const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
    CHECK(metrics.completed == 3);
    CHECK(metrics.failed == 3);
    CHECK(metrics.errors.at("HTTP 500").count == 3);
    CHECK(metrics.total_output_tokens == 9);
    CHECK(metrics.request_throughput == Approx(3.0 / run->duration_s));
    // After a 500 (a complete answer) the connection is reused.
    CHECK(server.connections_opened() == 1);
  }
}

TEST_CASE("llmc-bench counts an error event inside the stream as a failure", "[integration]") {
  ScriptedOpenAiServer server({absl::Milliseconds(10), absl::Milliseconds(10), 3});
  auto run = RunLoad(OptionsFor(server, "stream-error"), Prompts(2), {0, 0});
  REQUIRE(run.ok());
  const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
  CHECK(metrics.failed == 2);
  REQUIRE(metrics.errors.count("stream error") == 1);
  CHECK(metrics.errors.at("stream error").example == "scripted stream failure");
}

TEST_CASE("llmc-bench bounds each request and the whole run", "[integration]") {
  ScriptedOpenAiServer server;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  SECTION("--timeout fails a request that takes too long") {
    RunnerOptions options = OptionsFor(server, "slow");
    options.request_timeout = absl::Milliseconds(300);
    auto run = RunLoad(options, Prompts(2), {0, 0});
    REQUIRE(run.ok());
    const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
    CHECK(metrics.failed == 2);
    CHECK(metrics.errors.at("timeout").count == 2);
    CHECK(elapsed() < 2.0);
  }
  SECTION("--max-duration ends the run; unsent requests count as failed") {
    RunnerOptions options = OptionsFor(server, "slow");
    options.max_concurrency = 1;
    options.max_duration = absl::Milliseconds(400);
    auto run = RunLoad(options, Prompts(3), {0, 0, 0});
    REQUIRE(run.ok());
    CHECK(run->hit_max_duration);
    const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
    CHECK(metrics.failed == 3);
    CHECK(metrics.errors.at("max duration").count == 1);
    CHECK(metrics.errors.at("not sent").count == 2);
    CHECK(elapsed() < 2.0);
  }
  SECTION("a server that is not there") {
    RunnerOptions options = OptionsFor(server, "scripted");
    options.url.port = "1";  // nothing listens on port 1 here
    auto run = RunLoad(options, Prompts(2), {0, 0});
    REQUIRE(run.ok());
    const BenchMetrics metrics = bench::ComputeMetrics(run->results, run->duration_s, {});
    CHECK(metrics.failed == 2);
    CHECK(metrics.errors.count("connect") == 1);
  }
}

TEST_CASE("llmc-bench run, compare and plot work end to end from the command line", "[integration]") {
  ScriptedOpenAiServer server({absl::Milliseconds(100), absl::Milliseconds(20), 5});
  const std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  const std::string tag = std::to_string(server.port());
  std::vector<std::string> files;
  for (int concurrency : {1, 2}) {
    const std::string file = absl::StrCat(dir, "/llmc-bench-test-", tag, "-c", concurrency, ".json");
    files.push_back(file);
    std::ostringstream out, err;
    const int code = bench::BenchMain(
        {"--base-url", server.base_url(), "--num-prompts=4", "--input-len=16", "--output-len=5",
         absl::StrCat("--max-concurrency=", concurrency), "--ignore-eos", "--disable-progress", "--label=scripted",
         "--goodput", "ttft:1000", "tpot:1000", "--save-detailed", "--output-json", file},
        out, err);
    INFO(err.str());
    REQUIRE(code == 0);
    CHECK(out.str().find("Successful requests:") != std::string::npos);
    std::ifstream in(file);
    const json result = json::parse(in);
    CHECK(result["model"] == "scripted");  // found through GET /v1/models
    CHECK(result["completed"] == 4);
    CHECK(result["max_concurrency"] == concurrency);
    CHECK(result["request_goodput"].get<double>() == Approx(result["request_throughput"].get<double>()));
    CHECK(result["ttft_ms"]["median"].get<double>() == Approx(100).margin(30));
    CHECK(result["requests"].size() == 4);
  }
  // One check request before each run, asking for at most 4 tokens.
  const auto bodies = server.bodies();
  REQUIRE(bodies.size() == 10);
  CHECK(bodies[0]["max_tokens"] == 4);

  std::ostringstream table, err;
  REQUIRE(bench::BenchMain({"compare", files[0], files[1]}, table, err) == 0);
  CHECK(table.str().find("output throughput (tok/s)") != std::string::npos);
  CHECK(table.str().find("ratio") != std::string::npos);

  const std::string svg_path = absl::StrCat(dir, "/llmc-bench-test-", tag, ".svg");
  std::ostringstream plot_out;
  REQUIRE(bench::BenchMain({"plot", "--output", svg_path, files[0], files[1]}, plot_out, err) == 0);
  std::ifstream svg_in(svg_path);
  std::stringstream svg;
  svg << svg_in.rdbuf();
  CHECK(svg.str().find("<svg") != std::string::npos);
  CHECK(svg.str().find("scripted") != std::string::npos);

  std::ostringstream bad_out, bad_err;
  CHECK(bench::BenchMain({"--base-url", server.base_url(), "--model=fail-429", "--num-prompts=1", "--disable-progress"},
                         bad_out, bad_err) == 1);
  CHECK(bad_err.str().find("check request failed") != std::string::npos);
  CHECK(bench::BenchMain({"--input-len=abc"}, bad_out, bad_err) == 2);
  CHECK(bench::BenchMain({"--range-ratio=1.5"}, bad_out, bad_err) == 2);
  CHECK(bench::BenchMain({"--no-such-flag=1"}, bad_out, bad_err) == 2);

  for (const auto& file : files) std::remove(file.c_str());
  std::remove(svg_path.c_str());
}

TEST_CASE("llmc-bench multi-turn: each turn goes after the previous answer, with the conversation so far",
          "[integration]") {
  ScriptedOpenAiServer server(ScriptedOpenAiServer::Script{absl::Milliseconds(20), absl::Milliseconds(5), 3});
  bench::RandomDatasetOptions dataset;
  dataset.num_prompts = 2;
  dataset.input_len = 12;
  dataset.output_len = 3;
  dataset.seed = 3;
  dataset.run_id = 99;
  const bench::Conversations conversations = bench::MakeConversations(dataset, 3, 10);
  REQUIRE(conversations.prompts.size() == 6);
  CHECK(std::vector<std::string>(absl::StrSplit(conversations.system_prompt, ' ', absl::SkipEmpty())).size() == 10);
  RunnerOptions options = OptionsFor(server, "scripted");
  options.system_prompt = conversations.system_prompt;
  auto run = RunLoad(options, conversations.prompts, std::vector<double>(6, 0.0));
  REQUIRE(run.ok());
  for (const bench::RequestResult& result : run->results) {
    CHECK(result.success);
    CHECK(result.cached_tokens == 5);
    CHECK(result.generated_text == "tok0 tok1 tok2");
  }
  CHECK(bench::ComputeMetrics(run->results, run->duration_s, {}).total_cached_tokens == 30);

  // Every body: the system prompt, then each earlier turn and its answer, then this turn's message; and a
  // turn is only sent once the previous one has its answer, so the bodies of one conversation come in order.
  const std::vector<json> bodies = server.bodies();
  REQUIRE(bodies.size() == 6);
  std::vector<int> turns_seen(2, 0);
  for (const json& body : bodies) {
    const json& messages = body.at("messages");
    const std::string last = messages.back().at("content");
    size_t index = 0;
    while (index < 6 && conversations.prompts[index].prompt != last) ++index;
    REQUIRE(index < 6);
    const bench::BenchPrompt& prompt = conversations.prompts[index];
    INFO("conversation " << prompt.conversation << " turn " << prompt.turn);
    CHECK(prompt.turn == turns_seen[static_cast<size_t>(prompt.conversation)]++);
    REQUIRE(messages.size() == static_cast<size_t>(2 + 2 * prompt.turn));
    CHECK(messages[0] == json{{"role", "system"}, {"content", conversations.system_prompt}});
    for (int t = 0; t < prompt.turn; ++t) {
      CHECK(messages[1 + 2 * t] ==
            json{{"role", "user"}, {"content", conversations.prompts[index - prompt.turn + t].prompt}});
      CHECK(messages[2 + 2 * t] == json{{"role", "assistant"}, {"content", "tok0 tok1 tok2"}});
    }
  }
}

}  // namespace
}  // namespace llmc::testing
