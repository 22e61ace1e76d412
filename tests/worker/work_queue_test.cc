// How the CPU kernels split a job's items over the thread team (WorkQueue): every item exactly once, a member's
// own share in order first, the rest taken over when a member is held up; and the LM head's top-k lists, which
// therefore see panels in any order of ids.

#include "tests/support/team_size.h"
#include "worker/model/cpu/thread_team.h"
#include "worker/model/cpu/top_logits.h"
// (keep this order: libtorch's headers define glog's CHECK; Catch's, included after, must win)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/support/catch.h"

namespace llmc::model::cpu {
namespace {

using testing::ScopedTeamSize;

// Runs a job in which every member claims runs until the queue is empty; returns how often each item was
// handed out and, per member, the runs it got in order.
struct Claimed {
  std::vector<int> times;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> runs;
};
Claimed ClaimAll(WorkQueue& queue, int64_t count, int64_t run, int team_size) {
  Claimed claimed{std::vector<int>(count, 0), std::vector<std::vector<std::pair<int64_t, int64_t>>>(team_size)};
  std::vector<std::atomic<int>> times(count);
  ThreadTeam::Get().Run([&](TeamMember& member) {
    for (auto [begin, end] = queue.Claim(member, run); begin < end; std::tie(begin, end) = queue.Claim(member, run)) {
      claimed.runs[member.index()].emplace_back(begin, end);
      for (int64_t i = begin; i < end; ++i) times[i].fetch_add(1);
    }
  });
  for (int64_t i = 0; i < count; ++i) claimed.times[i] = times[i].load();
  return claimed;
}

TEST_CASE("contiguous shares cover every item in order, the larger ones first", "[unit][work_queue]") {
  for (int64_t size : {1, 2, 3, 8}) {
    for (int64_t count : {0, 1, 2, 5, 14, 100}) {
      CAPTURE(size, count);
      int64_t next = 0, previous_size = count;
      for (int64_t index = 0; index < size; ++index) {
        const auto [begin, end] = ContiguousShare(count, index, size);
        CHECK(begin == next);
        CHECK(end - begin >= count / size);
        CHECK(end - begin <= (count + size - 1) / size);
        CHECK(end - begin <= previous_size);
        next = end;
        previous_size = end - begin;
      }
      CHECK(next == count);
    }
  }
  // A single item (one decode row) goes to member 0, the caller's thread.
  CHECK(ContiguousShare(1, 0, 2) == std::make_pair<int64_t, int64_t>(0, 1));
  CHECK(ContiguousShare(1, 1, 2).first == ContiguousShare(1, 1, 2).second);
  CHECK(ContiguousShare(5, 0, 3) == std::make_pair<int64_t, int64_t>(0, 2));
  CHECK(ContiguousShare(5, 1, 3) == std::make_pair<int64_t, int64_t>(2, 4));
  CHECK(ContiguousShare(5, 2, 3) == std::make_pair<int64_t, int64_t>(4, 5));
}

TEST_CASE("work queue: every item once, for any count, run and number of shares", "[unit][work_queue]") {
  const ScopedTeamSize team(2);
  for (int64_t count : {0, 1, 2, 3, 14, 18, 152, 2374}) {
    for (int64_t run : {1, 2, 4, 74, 1000}) {
      for (int members : {1, 2, 3}) {  // 3: the job runs with fewer members than the queue has shares
        CAPTURE(count, run, members);
        WorkQueue queue(count, members);
        const Claimed claimed = ClaimAll(queue, count, run, 2);
        CHECK(std::all_of(claimed.times.begin(), claimed.times.end(), [](int t) { return t == 1; }));
        for (const auto& runs : claimed.runs) {
          for (const auto& [begin, end] : runs) CHECK((end - begin >= 1 && end - begin <= run));
        }
      }
    }
  }
}

TEST_CASE("work queue: each member starts at the front of its own share", "[unit][work_queue]") {
  const ScopedTeamSize team(2);
  WorkQueue queue(100, 2);
  std::vector<std::pair<int64_t, int64_t>> first(2);
  ThreadTeam::Get().Run([&](TeamMember& member) { first[member.index()] = queue.Claim(member, 10); });
  CHECK(first[0] == std::make_pair<int64_t, int64_t>(0, 10));
  CHECK(first[1] == std::make_pair<int64_t, int64_t>(50, 60));
}

TEST_CASE("work queue: a member held up leaves its share to the others, taken from the back", "[unit][work_queue]") {
  const ScopedTeamSize team(2);
  constexpr int64_t kCount = 40;
  WorkQueue queue(kCount, 2);
  std::atomic<bool> first_done{false};
  std::vector<std::vector<std::pair<int64_t, int64_t>>> runs(2);
  ThreadTeam::Get().Run([&](TeamMember& member) {
    if (member.index() == 1) {  // held up until member 0 has found the queue empty (at most 10 s)
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!first_done.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    }
    for (auto [begin, end] = queue.Claim(member, 4); begin < end; std::tie(begin, end) = queue.Claim(member, 4)) {
      runs[member.index()].emplace_back(begin, end);
    }
    if (member.index() == 0) first_done = true;
  });
  REQUIRE(first_done.load());
  CHECK(runs[1].empty());
  // Member 0: its own share 0..20 front to back, then member 1's share 20..40 back to front; runs of 4 at
  // most, and of half what is left in the share near its end.
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 4},   {4, 8},   {8, 12},  {12, 16}, {16, 18},
                                                             {18, 19}, {19, 20}, {36, 40}, {32, 36}, {28, 32},
                                                             {24, 28}, {22, 24}, {21, 22}, {20, 21}};
  CHECK(runs[0] == expected);
}

TEST_CASE("work queue: a single share hands out items from the front to every member", "[unit][work_queue]") {
  const ScopedTeamSize team(2);
  WorkQueue queue(1000, 1);
  const Claimed claimed = ClaimAll(queue, 1000, 1, 2);
  CHECK(std::all_of(claimed.times.begin(), claimed.times.end(), [](int t) { return t == 1; }));
  for (const auto& runs : claimed.runs) {
    CHECK(std::is_sorted(runs.begin(), runs.end()));  // each member's items increase
  }
}

// The k best of (value, id) pairs: larger value first, equal values by lower id.
std::vector<TopLogit> Reference(const std::vector<float>& values, int64_t k) {
  std::vector<TopLogit> all;
  for (int64_t id = 0; id < static_cast<int64_t>(values.size()); ++id) {
    if (values[id] == values[id]) all.push_back({values[id], id});
  }
  std::sort(all.begin(), all.end(), [](const TopLogit& a, const TopLogit& b) { return RanksAbove(a.value, a.id, b); });
  all.resize(std::min<int64_t>(k, static_cast<int64_t>(all.size())));
  return all;
}

TEST_CASE("top logits: panels offered in any order of ids keep the same k, ties by lower id", "[unit][work_queue]") {
  std::mt19937 random(7);
  constexpr int64_t kPanel = 64, kPanels = 40;
  for (int trial = 0; trial < 50; ++trial) {
    // Few distinct values, so that ties are everywhere and decide the lists.
    std::vector<float> values(kPanel * kPanels);
    for (float& v : values) v = static_cast<float>(random() % 6);
    if (trial % 5 == 0) values[random() % values.size()] = std::numeric_limits<float>::quiet_NaN();
    std::vector<int64_t> order(kPanels);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    for (int64_t k : {1, 5, 64, 100}) {
      CAPTURE(trial, k);
      std::vector<TopLogit> list(k);
      ClearTopLogits(list.data(), k);
      for (int64_t panel : order)
        OfferTopLogits(list.data(), k, values.data() + panel * kPanel, kPanel, panel * kPanel);
      const std::vector<TopLogit> expected = Reference(values, k);
      for (int64_t i = 0; i < k; ++i) {
        CHECK(list[i].id == expected[i].id);
        CHECK(list[i].value == expected[i].value);
      }
    }
  }
}

}  // namespace
}  // namespace llmc::model::cpu
