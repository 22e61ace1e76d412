// Integration test: the gateway's memory for a large non-streamed answer, measured from the real process
// (its peak resident set, VmHWM in /proc/<pid>/status) through the real llmc-gateway, llmc-controller and
// llmc-worker serving the small random-weight model.
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/http_client.h"
#include "tests/support/small_cluster.h"
#include "tests/support/small_model.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

// A /proc/<pid>/status field in KiB ("VmHWM:   123456 kB"), or -1 when absent.
int64_t StatusKib(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, field + ":")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    int64_t kib = -1;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) return kib;
  }
  return -1;
}

json ChatWithLogprobs(int n, int max_tokens) {
  return {{"model", kSmallModelName},
          {"messages", json::array({{{"role", "user"}, {"content", "Tell me about the sea."}}})},
          {"n", n},
          {"max_tokens", max_tokens},
          {"ignore_eos", true},
          {"logprobs", true},
          {"top_logprobs", 20}};
}

TEST_CASE("answer memory: a large non-streamed answer grows the gateway by about its size, and is bounded",
          "[integration][gateway]") {
  // 16 choices x 256 tokens x 20 alternatives: a body of about 6 MiB, which the gateway's former nlohmann::json
  // accumulation held as some 90 MiB of trees (365 MiB at 1,024 tokens).
  // Under the sanitizers, whose allocators keep freed memory aside and pad every block, the growth says
  // nothing about the gateway's own: a shorter answer checks the shape and the caps only.
  constexpr int kChoices = 16;
  constexpr int kTokens = kSanitized ? 32 : 256;
  constexpr uint64_t kMaxResponseBytes = 7 << 20;
  SmallCluster cluster("memory-worker", {"--max_running=16"},
                       {"--max_response_bytes=" + std::to_string(kMaxResponseBytes)});
  const pid_t gateway = cluster.gateway().process().pid();

  // A small answer first, so the baseline has every thread and pool the big one uses.
  const HttpReply warm = PostJson(cluster.port(), "/v1/chat/completions", ChatWithLogprobs(2, 4).dump());
  REQUIRE(warm.status == 200);
  const int64_t before_kib = StatusKib(gateway, "VmHWM");
  REQUIRE(before_kib > 0);

  const HttpReply reply = PostJson(cluster.port(), "/v1/chat/completions", ChatWithLogprobs(kChoices, kTokens).dump(),
                                   {}, absl::Seconds(90));
  INFO(cluster.Logs());
  REQUIRE(reply.status == 200);
  const json body = json::parse(reply.body);
  REQUIRE(body["choices"].size() == kChoices);
  for (const json& choice : body["choices"]) {
    CHECK(choice["logprobs"]["content"].size() == kTokens);
    CHECK(choice["logprobs"]["content"][0]["top_logprobs"].size() == 20);
  }
  const int64_t growth_kib = StatusKib(gateway, "VmHWM") - before_kib;
  const int64_t body_kib = static_cast<int64_t>(reply.body.size() / 1024);
  WARN("gateway peak RSS grew by " << growth_kib << " KiB for a body of " << body_kib << " KiB");
  // What was accumulated, the body built from it, and allocator slack; the old accumulation took 15x the body.
  if (!kSanitized) CHECK(growth_kib < 4 * body_kib + 8 * 1024);

  // An answer that can never fit is refused before any generation, naming the numbers.
  const HttpReply refused = PostJson(cluster.port(), "/v1/chat/completions", ChatWithLogprobs(kChoices, 1000).dump());
  CHECK(refused.status == 400);
  CHECK_THAT(refused.body, Catch::Contains("at least 12384000 bytes") && Catch::Contains("7340032"));
  // One that could fit but grows past the cap ends with a 400 saying so (16 x 400 tokens: left to the
  // uninstrumented build; tests/gateway/answer_size_test.cc checks the cap in the sanitized ones).
  if (kSanitized) return;
  const HttpReply too_large = PostJson(cluster.port(), "/v1/chat/completions", ChatWithLogprobs(kChoices, 400).dump());
  CHECK(too_large.status == 400);
  CHECK_THAT(too_large.body, Catch::Contains("the answer grew to") && Catch::Contains("'stream': true"));
}

}  // namespace
}  // namespace llmc::testing
