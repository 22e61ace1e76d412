// Prefix-aware dispatch: the prefix chunk hashes, the bounded index of where prefixes went, and the policy
// that sends repeated prefixes to the worker that holds them unless it is much busier.
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/prefix_hash.h"
#include "dispatch/prefix_index.h"
#include "tests/controller/registry_test_support.h"
#include "tests/support/catch.h"

namespace llmc::controller {

using dispatch::PrefixIndex;
namespace {

using testing::MakeRegistration;

// A prompt of `chunks` full chunks: the first `shared` come from `family`, the rest from `variant`.
std::string Prompt(int family, int variant, size_t chunks, size_t shared) {
  std::string text;
  for (size_t c = 0; c < chunks; ++c) {
    const std::string seed = c < shared ? "family " + std::to_string(family) : "variant " + std::to_string(variant);
    std::string chunk = seed + " chunk " + std::to_string(c) + " ";
    while (chunk.size() < kPrefixChunkBytes) chunk += "x";
    text += chunk.substr(0, kPrefixChunkBytes);
  }
  return text;
}

std::unique_ptr<WorkerRegistry> PrefixAwareRegistry(const Clock& clock, int workers, uint32_t capacity) {
  auto registry = MakeRegistry(clock, "prefix_aware");
  for (int w = 0; w < workers; ++w) {
    REQUIRE(registry->Register(MakeRegistration("w" + std::to_string(w), "10.0.0.1:1", "m", capacity)).ok());
  }
  return registry;
}

std::string PickFor(WorkerRegistry& registry, const std::string& prompt) {
  const std::vector<uint64_t> hashes = PrefixChunkHashes(prompt);
  return registry.Pick("m", {}, hashes).value().worker_id;
}

TEST_CASE("prefix hash: chained chunk hashes agree exactly as far as the inputs agree", "[unit][dispatch]") {
  const std::vector<uint64_t> a = PrefixChunkHashes(Prompt(1, 1, 4, 2));
  const std::vector<uint64_t> b = PrefixChunkHashes(Prompt(1, 2, 4, 2));
  REQUIRE(a.size() == 4);
  CHECK(a[0] == b[0]);
  CHECK(a[1] == b[1]);
  CHECK(a[2] != b[2]);
  CHECK(a[3] != b[3]);
  CHECK(PrefixChunkHashes(Prompt(1, 1, 4, 2)) == a);  // deterministic
  // Only full chunks count, and at most kMaxPrefixChunks of them.
  CHECK(PrefixChunkHashes(std::string(kPrefixChunkBytes - 1, 'x')).empty());
  CHECK(PrefixChunkHashes(std::string(kPrefixChunkBytes * 2 + 5, 'x')).size() == 2);
  CHECK(PrefixChunkHashes(std::string(kPrefixChunkBytes * (kMaxPrefixChunks + 3), 'x')).size() == kMaxPrefixChunks);
  // A chunk's hash depends on what came before it.
  const std::vector<uint64_t> same = PrefixChunkHashes(std::string(kPrefixChunkBytes * 2, 'x'));
  CHECK(same[0] != same[1]);
}

// A heartbeat from every worker of PrefixAwareRegistry with the given queues (a later one than before, so
// the policy's own count of what it sent since is reset too).
void HeartbeatAll(ManualClock& clock, WorkerRegistry& registry, int workers, uint32_t capacity,
                  const std::map<std::string, std::pair<uint32_t, uint32_t>>& queues = {}) {
  clock.Advance(absl::Milliseconds(1));
  for (int w = 0; w < workers; ++w) {
    const std::string id = "w" + std::to_string(w);
    const auto queue = queues.count(id) ? queues.at(id) : std::pair<uint32_t, uint32_t>{0, 0};
    REQUIRE(registry.Heartbeat(MakeHeartbeat(id, queue.first, queue.second, capacity)).ok());
  }
}

TEST_CASE("prefix_aware: repeated prefixes land on the worker that got them first, and new ones spread",
          "[unit][dispatch]") {
  ManualClock clock;
  auto registry = PrefixAwareRegistry(clock, 4, 64);
  std::map<int, std::string> home;
  // New prefixes, picked in a burst: each pick counts against its worker at once, so they spread.
  for (int family = 0; family < 8; ++family) home[family] = PickFor(*registry, Prompt(family, family, 8, 6));
  std::set<std::string> used;
  for (const auto& [family, worker] : home) used.insert(worker);
  CHECK(used.size() == 4);
  for (int round = 1; round < 5; ++round) {
    for (int family = 0; family < 8; ++family) {
      HeartbeatAll(clock, *registry, 4, 64);
      // Six shared chunks (a system prompt), then two of this request's own.
      INFO("family " << family << " round " << round);
      CHECK(PickFor(*registry, Prompt(family, round * 8 + family, 8, 6)) == home[family]);
    }
  }
}

TEST_CASE("prefix_aware: a busy worker loses its prefixes to idle ones, and the longer match wins",
          "[unit][dispatch]") {
  ManualClock clock;
  auto registry = PrefixAwareRegistry(clock, 2, 8);
  const std::string first = PickFor(*registry, Prompt(1, 1, 4, 4));
  const std::string other = first == "w0" ? "w1" : "w0";
  const auto set_loads = [&](uint32_t first_queue, uint32_t other_queue) {
    HeartbeatAll(clock, *registry, 2, 8, {{first, {first_queue, 0}}, {other, {other_queue, 0}}});
  };
  set_loads(0, 0);
  CHECK(PickFor(*registry, Prompt(1, 2, 4, 4)) == first);
  // Twice its capacity queued: its cached prefix does not outweigh that.
  set_loads(16, 0);
  CHECK(PickFor(*registry, Prompt(1, 3, 4, 4)) == other);

  // Family 4: `other` (steered there by load) gets its first 2 chunks, then `first` all 4. With equal
  // loads, each request goes to the worker that holds more of its own start.
  set_loads(16, 0);
  CHECK(PickFor(*registry, Prompt(4, 40, 4, 2)) == other);
  set_loads(0, 16);
  CHECK(PickFor(*registry, Prompt(4, 41, 4, 4)) == first);
  set_loads(0, 0);
  CHECK(PickFor(*registry, Prompt(4, 42, 4, 4)) == first);  // 4 of 4 chunks against 2 of 4
  set_loads(0, 0);
  CHECK(PickFor(*registry, Prompt(4, 40, 4, 2)) == other);  // 4 of 4 against 2 of 4
}

TEST_CASE("prefix_aware: prefill queued on a worker counts against it, and so do the picks sent since",
          "[unit][dispatch]") {
  ManualClock clock;
  auto registry = PrefixAwareRegistry(clock, 2, 64);
  const std::string home = PickFor(*registry, Prompt(3, 3, 8, 8));  // 8 chunks: about 256 tokens cached
  const std::string other = home == "w0" ? "w1" : "w0";
  HeartbeatAll(clock, *registry, 2, 64);
  v1::HeartbeatRequest busy = MakeHeartbeat(home, 0, 0, 64);
  busy.mutable_load()->set_pending_prefill_tokens(1000);
  REQUIRE(registry->Heartbeat(busy).ok());
  CHECK(PickFor(*registry, Prompt(3, 4, 8, 4)) == other);  // `other` now holds the first 4 chunks
  // Without the queued prefill, the longer prefix wins again; then the picks charged to it send the next
  // ones of a burst elsewhere.
  HeartbeatAll(clock, *registry, 2, 64);
  CHECK(PickFor(*registry, Prompt(3, 5, 8, 8)) == home);
  int elsewhere = 0;
  for (int i = 0; i < 8; ++i) elsewhere += PickFor(*registry, Prompt(3, 6 + i, 8, 8)) == other;
  CHECK(elsewhere > 0);
}

TEST_CASE("prefix_aware: the estimated queue drains at the prefill rate the worker reports", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = PrefixAwareRegistry(clock, 2, 64);
  const std::string home = PickFor(*registry, Prompt(5, 5, 8, 8));  // about 256 tokens cached
  const std::string other = home == "w0" ? "w1" : "w0";
  HeartbeatAll(clock, *registry, 2, 64);
  v1::HeartbeatRequest busy = MakeHeartbeat(home, 0, 0, 64);
  busy.mutable_load()->set_pending_prefill_tokens(2000);
  busy.mutable_load()->set_prefill_tokens_per_second(10000);
  REQUIRE(registry->Heartbeat(busy).ok());
  // 2,000 tokens queued outweigh the 256 it holds...
  CHECK(PickFor(*registry, Prompt(5, 6, 8, 4)) == other);
  // ... until, at 10,000 tokens/s, 0.2 s have computed them: no heartbeat needed.
  clock.Advance(absl::Milliseconds(200));
  CHECK(PickFor(*registry, Prompt(5, 7, 8, 8)) == home);
  // Without a reported rate, the queue stands until the next heartbeat says otherwise.
  busy.mutable_load()->set_prefill_tokens_per_second(0);
  REQUIRE(registry->Heartbeat(busy).ok());
  clock.Advance(absl::Milliseconds(200));
  CHECK(PickFor(*registry, Prompt(5, 8, 8, 8)) == other);
}

TEST_CASE("prefix_aware: load figures that are not numbers leave the scores numbers", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = PrefixAwareRegistry(clock, 2, 64);
  HeartbeatAll(clock, *registry, 2, 64);
  v1::HeartbeatRequest garbage = MakeHeartbeat("w0", 0, 0, 64);
  garbage.mutable_load()->set_kv_cache_usage(std::numeric_limits<float>::quiet_NaN());
  garbage.mutable_load()->set_prefill_tokens_per_second(std::numeric_limits<float>::infinity());
  garbage.mutable_load()->set_tokens_per_second(-3);
  REQUIRE(registry->Heartbeat(garbage).ok());
  for (const v1::WorkerInfo& info : registry->ListWorkers()) {
    if (info.worker_id() != "w0") continue;
    CHECK(info.load().kv_cache_usage() == 1.0f);  // not a number: counted as full
    CHECK(info.load().prefill_tokens_per_second() == 0);
    CHECK(info.load().tokens_per_second() == 0);
  }
  // A NaN score would win every comparison it comes first in; counted as full, w0 loses them all.
  for (int i = 0; i < 4; ++i) CHECK(PickFor(*registry, Prompt(20 + i, i, 2, 2)) == "w1");
}

TEST_CASE("prefix_aware: a worker that registers again or leaves is forgotten", "[unit][dispatch]") {
  ManualClock clock;
  auto registry = PrefixAwareRegistry(clock, 2, 64);
  const std::string prompt = Prompt(7, 7, 8, 8);
  const std::string home = PickFor(*registry, prompt);
  const std::string other = home == "w0" ? "w1" : "w0";
  // One running sequence on `home` costs less than the 8 chunks it holds...
  HeartbeatAll(clock, *registry, 2, 64, {{home, {0, 1}}});
  CHECK(PickFor(*registry, prompt) == home);
  // ... but once it registers again (restarted, its cache empty) the prefix no longer counts for it.
  REQUIRE(registry->Register(MakeRegistration(home, "10.0.0.1:1", "m", 64)).ok());
  HeartbeatAll(clock, *registry, 2, 64, {{home, {0, 1}}});
  CHECK(PickFor(*registry, prompt) == other);
  REQUIRE(registry->Deregister(other).value());
  CHECK(PickFor(*registry, prompt) == home);
}

TEST_CASE("prefix index: matches up to the deepest chunk recorded, stays bounded, evicts entries not used since",
          "[unit][dispatch]") {
  PrefixIndex index(4);
  const std::string a = "a", b = "b";
  const std::vector<const std::string*> workers = {&a, &b};
  std::vector<int64_t> matched;
  index.Record({1, 2, 3}, "a");
  index.Record({1, 2}, "b");
  index.Match({1, 2, 3}, workers, matched);
  CHECK(matched == std::vector<int64_t>{3, 2});
  index.Match({1, 2, 7}, workers, matched);  // diverges from both after two chunks
  CHECK(matched == std::vector<int64_t>{2, 2});
  index.Match({9}, workers, matched);  // never recorded
  CHECK(matched == std::vector<int64_t>{0, 0});

  index.Record({4}, "a");
  index.Record({5}, "a");  // a fifth hash: one goes (the clock hand clears every mark on its first pass)
  CHECK(index.size() == 4);
  index.Match({2}, workers, matched);  // 2 is used again; 5, newer, is not
  index.Record({6}, "a");
  CHECK(index.size() == 4);
  index.Match({5}, workers, matched);
  CHECK(matched[0] == 0);
  index.Match({2}, workers, matched);
  CHECK(matched[0] == 1);

  index.Forget("a");
  index.Match({2}, workers, matched);
  CHECK(matched == std::vector<int64_t>{0, 1});
}

TEST_CASE("prefix index: a worker keeps its match through a later chunk when a popular first chunk turns over",
          "[unit][dispatch]") {
  PrefixIndex index(1024);
  const std::string a = "a";
  const std::vector<const std::string*> workers = {&a};
  std::vector<int64_t> matched;
  index.Record({10, 11, 12}, "a");  // a conversation under a popular system prompt (chunk 10)
  // Other conversations under the same system prompt go to other workers, until chunk 10's entry no longer
  // lists "a". The chained hash 12 still stands for all three chunks.
  for (size_t w = 0; w < PrefixIndex::kWorkersPerHash; ++w) index.Record({10}, "w" + std::to_string(w));
  index.Match({10, 11, 12, 13}, workers, matched);
  CHECK(matched == std::vector<int64_t>{3});
  index.Match({10}, workers, matched);
  CHECK(matched == std::vector<int64_t>{0});
}

}  // namespace
}  // namespace llmc::controller
