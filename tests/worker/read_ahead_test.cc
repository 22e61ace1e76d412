// The read-ahead between a decode step's projections (worker/model/cpu/read_ahead.h): each projection learns
// which one followed it, never hands out memory that was freed, and a worker's pending read keeps its memory
// alive only until the read ends.

#include "worker/model/cpu/read_ahead.h"

#include "tests/support/team_size.h"
#include "tests/support/wait.h"
#include "worker/model/cpu/thread_team.h"
// (keep this order: libtorch's headers define glog's CHECK; Catch's, included after, must win)
#include <atomic>

#include "tests/support/catch.h"

namespace llmc::model::cpu {
namespace {

using testing::ScopedTeamSize;
using testing::WaitUntil;

at::Tensor Panels(int64_t panels, int64_t panel_bytes) { return at::zeros({panels, panel_bytes}, at::kByte); }

const char* Data(const at::Tensor& tensor) { return static_cast<const char*>(tensor.data_ptr()); }

TEST_CASE("a projection hands out the one that followed it the last time", "[unit][read_ahead]") {
  const at::Tensor qkv = Panels(18, 256), output = Panels(14, 256), gate_up = Panels(152, 128);
  // The first step learns the order; nothing is known before.
  CHECK(FollowingPanels(qkv, 256).data == nullptr);
  CHECK(FollowingPanels(output, 256).data == nullptr);
  CHECK(FollowingPanels(gate_up, 128).data == nullptr);
  // The next step: each gets its follower, the last one the first (the step repeats).
  const NextPanels after_qkv = FollowingPanels(qkv, 256);
  CHECK(after_qkv.data == Data(output));
  CHECK(after_qkv.panels == 14);
  CHECK(after_qkv.panel_bytes == 256);
  const NextPanels after_output = FollowingPanels(output, 256);
  CHECK(after_output.data == Data(gate_up));
  CHECK(after_output.panels == 152);
  CHECK(after_output.panel_bytes == 128);
  CHECK(FollowingPanels(gate_up, 128).data == Data(qkv));
}

TEST_CASE("a view into a larger weight is followed at its own offset", "[unit][read_ahead]") {
  const at::Tensor arena = Panels(64, 512);
  const at::Tensor first = arena.narrow(0, 0, 16), second = arena.narrow(0, 16, 48);
  FollowingPanels(first, 512);
  FollowingPanels(second, 512);
  const NextPanels next = FollowingPanels(first, 512);
  CHECK(next.data == Data(arena) + 16 * 512);
  CHECK(next.panels == 48);
}

TEST_CASE("a freed follower is never handed out", "[unit][read_ahead]") {
  const at::Tensor kept = Panels(8, 256);
  at::Tensor freed = Panels(8, 256);
  FollowingPanels(kept, 256);
  FollowingPanels(freed, 256);
  CHECK(FollowingPanels(kept, 256).data == Data(freed));
  FollowingPanels(freed, 256);  // the order is kept -> freed -> kept -> freed
  freed = at::Tensor();
  CHECK(FollowingPanels(kept, 256).data == nullptr);
}

TEST_CASE("with the read-ahead off nothing is handed out or learned", "[unit][read_ahead]") {
  const at::Tensor first = Panels(4, 256), second = Panels(4, 256);
  SetReadAheadEnabled(false);
  for (int step = 0; step < 2; ++step) {
    CHECK(FollowingPanels(first, 256).data == nullptr);
    CHECK(FollowingPanels(second, 256).data == nullptr);
  }
  SetReadAheadEnabled(true);
  CHECK(FollowingPanels(first, 256).data == nullptr);
}

TEST_CASE("a worker reads its share of the next panels and then lets their memory go", "[unit][read_ahead]") {
  ScopedTeamSize team_size(2);
  const at::Tensor next_weight = Panels(64, 4096);
  const c10::Storage memory = next_weight.storage();
  const NextPanels next{memory, Data(next_weight), 64, 4096};
  const size_t owners = memory.use_count();  // the tensor, `memory` and `next`
  std::atomic<int> members{0};
  ThreadTeam::Get().Run([&](TeamMember& member) {
    members.fetch_add(1);
    ReadShareWhileWaiting(member, next);  // the calling thread (member 0) reads nothing
  });
  REQUIRE(members.load() == 2);
  // The worker held the memory while it read its half (128 KiB here), and let it go after.
  CHECK(WaitUntil([&] { return memory.use_count() == owners; }, absl::Seconds(10)));
  // Another job in between: whatever is still pending ends as well.
  ThreadTeam::Get().Run([&](TeamMember& member) { ReadShareWhileWaiting(member, next); });
  ThreadTeam::Get().Run([](TeamMember&) {});
  CHECK(WaitUntil([&] { return memory.use_count() == owners; }, absl::Seconds(10)));
}

}  // namespace
}  // namespace llmc::model::cpu
