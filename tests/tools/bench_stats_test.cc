// Unit tests of llmc-bench's pure parts: statistics, goodput, arrival schedules, the random dataset, SSE
// and chunk parsing, URLs and flags.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tools/bench/arrivals.h"
#include "tools/bench/bench_config.h"
#include "tools/bench/bench_metrics.h"
#include "tools/bench/openai_protocol.h"
#include "tools/bench/prompt_dataset.h"
#include "tools/bench/sse_parser.h"

namespace llmc::bench {
namespace {

RequestResult Done(double ttft_s, double latency_s, int64_t tokens, int64_t prompt_tokens = 10) {
  RequestResult result;
  result.success = true;
  result.ttft_s = ttft_s;
  result.latency_s = latency_s;
  result.output_tokens = tokens;
  result.prompt_tokens = prompt_tokens;
  return result;
}

RequestResult Failed(const std::string& kind) {
  RequestResult result;
  result.error_kind = kind;
  result.error = kind + " details";
  return result;
}

TEST_CASE("percentiles interpolate between closest ranks like numpy", "[unit]") {
  const std::vector<double> values = {1, 2, 3, 4};
  CHECK(Percentile(values, 50) == Approx(2.5));
  CHECK(Percentile(values, 90) == Approx(3.7));
  CHECK(Percentile(values, 99) == Approx(3.97));
  CHECK(Percentile(values, 0) == 1);
  CHECK(Percentile(values, 100) == 4);
  CHECK(Percentile({7}, 99) == 7);
  CHECK(Percentile({}, 50) == 0);

  std::vector<double> hundred(100);
  std::iota(hundred.begin(), hundred.end(), 1.0);  // 1..100
  CHECK(Percentile(hundred, 99) == Approx(99.01));
  CHECK(Percentile(hundred, 90) == Approx(90.1));
}

TEST_CASE("latency summaries give mean, std, median, p90, p99, min and max", "[unit]") {
  const LatencyStats stats = Summarize({4, 1, 3, 2});  // unsorted on purpose
  CHECK(stats.count == 4);
  CHECK(stats.mean == Approx(2.5));
  CHECK(stats.std == Approx(std::sqrt(1.25)));
  CHECK(stats.median == Approx(2.5));
  CHECK(stats.p90 == Approx(3.7));
  CHECK(stats.p99 == Approx(3.97));
  CHECK(stats.min == 1);
  CHECK(stats.max == 4);
  CHECK(Summarize({}).count == 0);
}

TEST_CASE("TPOT excludes the first token", "[unit]") {
  CHECK(TimePerOutputToken(Done(0.2, 0.65, 10)).value() == Approx(0.05));
  CHECK_FALSE(TimePerOutputToken(Done(0.2, 0.2, 1)).has_value());
}

TEST_CASE("metrics aggregate successful requests and classify failures", "[unit]") {
  std::vector<RequestResult> results = {Done(0.1, 1.0, 10, 100), Done(0.3, 2.0, 20, 50), Failed("HTTP 429"),
                                        Failed("HTTP 429"), Failed("timeout")};
  results[0].itl_s = {0.1, 0.1};
  results[1].itl_s = {0.05};
  results[0].usage_reported = true;
  const BenchMetrics metrics = ComputeMetrics(results, 4.0, {});
  CHECK(metrics.completed == 2);
  CHECK(metrics.failed == 3);
  CHECK(metrics.total_input_tokens == 150);
  CHECK(metrics.total_output_tokens == 30);
  CHECK(metrics.usage_reported == 1);
  CHECK(metrics.request_throughput == Approx(0.5));
  CHECK(metrics.output_throughput == Approx(7.5));
  CHECK(metrics.total_token_throughput == Approx(45.0));
  CHECK_FALSE(metrics.request_goodput.has_value());
  CHECK(metrics.ttft_ms.mean == Approx(200));
  CHECK(metrics.e2el_ms.max == Approx(2000));
  CHECK(metrics.itl_ms.count == 3);
  CHECK(metrics.itl_ms.median == Approx(100));
  CHECK(metrics.tpot_ms.mean == Approx((900.0 / 9 + 1700.0 / 19) / 2));
  REQUIRE(metrics.errors.size() == 2);
  CHECK(metrics.errors.at("HTTP 429").count == 2);
  CHECK(metrics.errors.at("HTTP 429").example == "HTTP 429 details");
  CHECK(metrics.errors.at("timeout").count == 1);
}

TEST_CASE("goodput counts the requests that meet every objective", "[unit]") {
  const std::vector<RequestResult> results = {
      Done(0.1, 1.0, 10),  // TTFT 100 ms, TPOT 100 ms, E2EL 1000 ms
      Done(0.6, 1.0, 10),  // TTFT 600 ms: too slow to first token
      Done(0.2, 3.0, 11),  // TPOT 280 ms: too slow per token
      Done(0.2, 0.2, 1),   // one token: TPOT counts as 0
      Failed("HTTP 500"),  // never good
  };
  auto objectives = ParseGoodput({"ttft:500", "tpot:150"});
  REQUIRE(objectives.ok());
  BenchMetrics metrics = ComputeMetrics(results, 2.0, *objectives);
  CHECK(metrics.good_requests == 2);
  REQUIRE(metrics.request_goodput.has_value());
  CHECK(*metrics.request_goodput == Approx(1.0));

  objectives = ParseGoodput({"ttft:500", "tpot:150", "e2el:900"});
  REQUIRE(objectives.ok());
  metrics = ComputeMetrics(results, 2.0, *objectives);
  CHECK(metrics.good_requests == 1);
  CHECK(*metrics.request_goodput == Approx(0.5));

  // Limits are inclusive.
  objectives = ParseGoodput({"ttft:100"});
  CHECK(MeetsObjectives(Done(0.1, 1.0, 10), *objectives));
  CHECK_FALSE(MeetsObjectives(Done(0.1001, 1.0, 10), *objectives));
}

TEST_CASE("goodput objectives are parsed strictly", "[unit]") {
  auto parsed = ParseGoodput({"TTFT:250.5", "e2el:3000"});
  REQUIRE(parsed.ok());
  CHECK(parsed->ttft_ms == 250.5);
  CHECK(parsed->tpot_ms < 0);
  CHECK(parsed->e2el_ms == 3000);
  CHECK_FALSE(ParseGoodput({}).value().any());
  CHECK_FALSE(ParseGoodput({"ttft"}).ok());
  CHECK_FALSE(ParseGoodput({"ttft:-5"}).ok());
  CHECK_FALSE(ParseGoodput({"ttft:abc"}).ok());
  CHECK_FALSE(ParseGoodput({"latency:5"}).ok());
  CHECK_FALSE(ParseGoodput({"ttft:5", "ttft:6"}).ok());
}

double Mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

// Mean and coefficient of variation of the gaps between arrivals.
std::pair<double, double> GapStats(const std::vector<double>& times) {
  std::vector<double> gaps;
  for (size_t i = 1; i < times.size(); ++i) gaps.push_back(times[i] - times[i - 1]);
  const double mean = Mean(gaps);
  double squares = 0;
  for (double g : gaps) squares += (g - mean) * (g - mean);
  return {mean, std::sqrt(squares / gaps.size()) / mean};
}

TEST_CASE("arrivals follow a Poisson process at the requested rate", "[unit]") {
  const std::vector<double> times = ArrivalTimes(20001, 10.0, 1.0, 42);
  REQUIRE(times.size() == 20001);
  CHECK(times[0] == 0);
  for (size_t i = 1; i < times.size(); ++i) REQUIRE(times[i] >= times[i - 1]);
  const auto [mean_gap, cv] = GapStats(times);
  CHECK(mean_gap == Approx(0.1).epsilon(0.03));  // 20000 gaps: the mean is within ~0.7% (1 sigma)
  CHECK(cv == Approx(1.0).epsilon(0.05));        // exponential gaps: std = mean
  CHECK(times.back() / 20000 == Approx(0.1).epsilon(0.03));

  CHECK(ArrivalTimes(100, 10.0, 1.0, 42) == std::vector<double>(times.begin(), times.begin() + 100));
  CHECK(ArrivalTimes(100, 10.0, 1.0, 43) != std::vector<double>(times.begin(), times.begin() + 100));
}

TEST_CASE("gamma arrivals: burstiness changes the spread, not the rate", "[unit]") {
  SECTION("bursty (shape 0.25): gaps vary twice as much as Poisson's") {
    const auto [mean_gap, cv] = GapStats(ArrivalTimes(40001, 5.0, 0.25, 7));
    CHECK(mean_gap == Approx(0.2).epsilon(0.05));
    CHECK(cv == Approx(2.0).epsilon(0.1));  // 1/sqrt(shape)
  }
  SECTION("regular (shape 4): half the spread") {
    const auto [mean_gap, cv] = GapStats(ArrivalTimes(20001, 5.0, 4.0, 7));
    CHECK(mean_gap == Approx(0.2).epsilon(0.03));
    CHECK(cv == Approx(0.5).epsilon(0.05));
  }
  SECTION("an infinite rate sends everything at once") {
    CHECK(ArrivalTimes(5, INFINITY, 1.0, 7) == std::vector<double>(5, 0.0));
  }
}

TEST_CASE("the random dataset gives unique prefixes and the asked lengths", "[unit]") {
  CHECK(PromptWords().size() == 256);
  CHECK(std::set<std::string>(PromptWords().begin(), PromptWords().end()).size() == 256);

  RandomDatasetOptions options;
  options.num_prompts = 2000;
  options.input_len = 64;
  options.output_len = 32;
  options.seed = 3;
  options.run_id = 99;
  const auto prompts = MakeRandomPrompts(options);
  REQUIRE(prompts.size() == 2000);
  std::set<std::string> prefixes;
  for (const auto& prompt : prompts) {
    std::vector<std::string> words = absl::StrSplit(prompt.prompt, ' ');
    CHECK(static_cast<int64_t>(words.size()) == 64);
    CHECK(prompt.input_len == 64);
    CHECK(prompt.output_len == 32);
    words.resize(kUniquePrefixWords);
    prefixes.insert(absl::StrJoin(words, " "));
  }
  CHECK(prefixes.size() == 2000);

  // Deterministic, and another run id changes every prefix.
  const auto again = MakeRandomPrompts(options);
  CHECK(again[17].prompt == prompts[17].prompt);
  options.run_id = 100;
  const auto other_run = MakeRandomPrompts(options);
  CHECK(other_run[0].prompt.substr(0, 20) != prompts[0].prompt.substr(0, 20));

  // Range ratio: lengths spread over [len*(1-r), len*(1+r)].
  options.range_ratio = 0.5;
  std::set<int64_t> lengths;
  for (const auto& prompt : MakeRandomPrompts(options)) {
    CHECK(prompt.input_len >= 32);
    CHECK(prompt.input_len <= 96);
    CHECK(prompt.output_len >= 16);
    CHECK(prompt.output_len <= 48);
    CHECK(CountWords(prompt.prompt) == prompt.input_len);
    lengths.insert(prompt.input_len);
  }
  CHECK(lengths.size() > 30);

  // Never shorter than the unique prefix.
  options.range_ratio = 0;
  options.input_len = 2;
  CHECK(MakeRandomPrompts(options)[0].input_len == kUniquePrefixWords);
}

TEST_CASE("prompts files are JSONL with prompt and optional output_len", "[unit]") {
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                           "/llmc-bench-prompts-" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream out(path);
    out << R"({"prompt": "one two three", "output_len": 5})"
        << "\n\n"
        << R"({"prompt": "four"})"
        << "\n";
  }
  auto prompts = LoadPromptsFile(path, 3, 64);
  REQUIRE(prompts.ok());
  REQUIRE(prompts->size() == 3);
  CHECK((*prompts)[0].prompt == "one two three");
  CHECK((*prompts)[0].input_len == 3);
  CHECK((*prompts)[0].output_len == 5);
  CHECK((*prompts)[1].output_len == 64);
  CHECK((*prompts)[2].prompt == "one two three");  // cycled
  {
    std::ofstream out(path);
    out << R"({"prompt": "ok"})"
        << "\n"
        << R"({"text": "no prompt"})"
        << "\n";
  }
  auto bad = LoadPromptsFile(path, 1, 64);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find(":2: \"prompt\" must be") != std::string::npos);
  std::remove(path.c_str());
  CHECK(LoadPromptsFile(path, 1, 64).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("the SSE parser reassembles events across any split", "[unit]") {
  const std::string stream =
      ": keep-alive\n\ndata: {\"a\":1}\n\nevent: x\r\ndata: two\r\ndata: lines\r\n\r\ndata:[DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "two\nlines", "[DONE]"};
  for (size_t split = 0; split <= stream.size(); ++split) {
    SseParser parser;
    std::vector<std::string> events;
    REQUIRE(parser.Feed(absl::string_view(stream).substr(0, split), events));
    REQUIRE(parser.Feed(absl::string_view(stream).substr(split), events));
    INFO("split at " << split);
    CHECK(events == expected);
    CHECK(parser.comments() == 1);
  }
  SseParser byte_by_byte;
  std::vector<std::string> events;
  for (char c : stream) byte_by_byte.Feed(absl::string_view(&c, 1), events);
  CHECK(events == expected);

  SseParser bounded(16);
  CHECK_FALSE(bounded.Feed(std::string(17, 'x'), events));
}

TEST_CASE("stream chunks: text, usage, errors and [DONE]", "[unit]") {
  auto chat = InterpretChunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})", true);
  CHECK(chat.kind == StreamChunk::Kind::kData);
  CHECK(chat.text == "Hi");
  CHECK(InterpretChunk(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})", true).text.empty());
  CHECK(InterpretChunk(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})", true).text == "hmm");
  // Reasoning counts as generated text for timing, and is kept apart for llmc-chat to show.
  const auto both = InterpretChunk(R"({"choices":[{"delta":{"reasoning_content":"hmm","content":"ok"}}]})", true);
  CHECK(both.text == "hmmok");
  CHECK(both.reasoning == "hmm");
  CHECK(chat.reasoning.empty());
  CHECK(InterpretChunk(R"({"choices":[{"index":0,"text":" there"}]})", false).text == " there");
  auto usage = InterpretChunk(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}})", true);
  CHECK(usage.text.empty());
  CHECK(usage.completion_tokens == 3);
  CHECK(usage.prompt_tokens == 7);
  CHECK(InterpretChunk(R"({"choices":[{"delta":{"content":"x"}}],"usage":null})", true).completion_tokens ==
        std::nullopt);
  CHECK(InterpretChunk("[DONE]", true).kind == StreamChunk::Kind::kDone);
  auto error = InterpretChunk(R"({"error":{"message":"boom","type":"server_error"}})", true);
  CHECK(error.kind == StreamChunk::Kind::kError);
  CHECK(error.error == "boom");
  CHECK(InterpretChunk("{not json", true).kind == StreamChunk::Kind::kMalformed);
  CHECK(ErrorMessageFromBody(R"({"error":{"message":"queue full"}})") == "queue full");
  CHECK(ErrorMessageFromBody("plain text") == "plain text");
  CHECK(FirstModelId(R"({"data":[{"id":"m1"},{"id":"m2"}]})").value() == "m1");
  CHECK_FALSE(FirstModelId(R"({"data":[]})").ok());
}

TEST_CASE("base URLs and endpoints", "[unit]") {
  auto url = ParseBaseUrl("http://127.0.0.1:8000/v1/");
  REQUIRE(url.ok());
  CHECK(url->host == "127.0.0.1");
  CHECK(url->port == "8000");
  CHECK(EndpointPath(*url, "chat") == "/v1/chat/completions");
  CHECK(EndpointPath(*url, "completions") == "/v1/completions");
  CHECK(ModelsPath(*url) == "/v1/models");
  auto bare = ParseBaseUrl("http://localhost");
  REQUIRE(bare.ok());
  CHECK(bare->port == "80");
  CHECK(bare->HostHeader() == "localhost");
  CHECK(EndpointPath(*bare, "chat") == "/v1/chat/completions");
  CHECK(EndpointPath(*bare, "/custom/path") == "/custom/path");
  auto prefixed = ParseBaseUrl("http://[::1]:9000/api");
  REQUIRE(prefixed.ok());
  CHECK(prefixed->host == "::1");
  CHECK(EndpointPath(*prefixed, "chat") == "/api/v1/chat/completions");
  CHECK_FALSE(ParseBaseUrl("https://example.com").ok());
  CHECK_FALSE(ParseBaseUrl("http://host:99999").ok());
  CHECK_FALSE(ParseBaseUrl("http://:80").ok());
  CHECK(IsChatEndpoint("chat"));
  CHECK_FALSE(IsChatEndpoint("completions"));
}

TEST_CASE("request bodies stream with usage", "[unit]") {
  CompletionRequest request;
  request.model = "m";
  request.prompt = "hello";
  request.max_tokens = 9;
  request.ignore_eos = true;
  const auto chat = nlohmann::json::parse(BuildRequestBody(request));
  CHECK(chat["messages"][0]["content"] == "hello");
  CHECK(chat["stream"] == true);
  CHECK(chat["stream_options"]["include_usage"] == true);
  CHECK(chat["max_tokens"] == 9);
  CHECK(chat["ignore_eos"] == true);
  request.chat = false;
  request.ignore_eos = false;
  const auto completion = nlohmann::json::parse(BuildRequestBody(request));
  CHECK(completion["prompt"] == "hello");
  CHECK_FALSE(completion.contains("ignore_eos"));
}

TEST_CASE("flags: dashes or underscores, vLLM's --goodput form, validation", "[unit]") {
  CHECK(NormalizeFlagArgs({"--input-len=5", "--max-concurrency", "4", "--goodput", "ttft:5", "tpot:6", "--seed=1"}) ==
        std::vector<std::string>{"--input_len=5", "--max_concurrency", "4", "--goodput=ttft:5,tpot:6", "--seed=1"});
  CHECK(NormalizeFlagArgs({"--base-url=http://a-b:1/x-y"}) == std::vector<std::string>{"--base_url=http://a-b:1/x-y"});
  CHECK(ParseRequestRate("inf").value() == INFINITY);
  CHECK(ParseRequestRate("2.5").value() == 2.5);
  CHECK_FALSE(ParseRequestRate("0").ok());
  CHECK_FALSE(ParseRequestRate("fast").ok());
  BenchConfig config;
  CHECK(config.Validate().ok());
  config.range_ratio = 1.0;
  CHECK_FALSE(config.Validate().ok());
  config = BenchConfig();
  config.endpoint = "embeddings";
  CHECK_FALSE(config.Validate().ok());
  config = BenchConfig();
  config.base_url = "https://x";
  CHECK_FALSE(config.Validate().ok());
}

}  // namespace
}  // namespace llmc::bench
