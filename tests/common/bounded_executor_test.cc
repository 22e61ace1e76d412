// The executor for heavy request work: runs what it accepts, refuses beyond its queue, drains on shutdown.
#include "common/bounded_executor.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "tests/support/catch.h"

namespace llmc {
namespace {

TEST_CASE("bounded executor: a full queue refuses at once, shutdown runs what was accepted", "[unit][common]") {
  std::atomic<int> ran{0};
  absl::Notification started, release;
  BoundedExecutor executor(/*num_threads=*/1, /*max_queued=*/2);
  // The one thread blocks in the first task, so the next two fill the queue.
  REQUIRE(executor.TrySubmit([&] {
    started.Notify();
    release.WaitForNotification();
    ++ran;
  }));
  REQUIRE(started.WaitForNotificationWithTimeout(absl::Seconds(5)));
  CHECK(executor.TrySubmit([&] { ++ran; }));
  CHECK(executor.TrySubmit([&] { ++ran; }));
  CHECK_FALSE(executor.TrySubmit([&] { ++ran; }));  // two queued: refused, never run
  release.Notify();
  executor.Shutdown();
  CHECK(ran.load() == 3);
  CHECK_FALSE(executor.TrySubmit([&] { ++ran; }));
  CHECK(ran.load() == 3);
}

}  // namespace
}  // namespace llmc
