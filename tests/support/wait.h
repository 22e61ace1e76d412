#ifndef LLMC_TESTS_SUPPORT_WAIT_H_
#define LLMC_TESTS_SUPPORT_WAIT_H_

#include <functional>

#include "absl/time/time.h"

namespace llmc::testing {

// How much longer every WaitUntil may wait: LLMC_TEST_WAIT_SCALE (1 to 20, default 1). scripts/test.sh raises it
// under the sanitizers, where threads run several times slower; a wait whose condition holds still ends at once.
double WaitScale();

// Polls `condition` until it holds or `timeout` (times WaitScale) passes; true when it held. Every wait in tests
// is bounded, and every caller waits for something to happen, never for it not to.
bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout,
               absl::Duration poll_interval = absl::Milliseconds(20));

// A loopback TCP port that was free a moment ago, chosen at random below the kernel's ephemeral range.
int PickFreePort();

// True when a TCP connection to 127.0.0.1:`port` is accepted right now.
bool LoopbackPortAccepts(int port);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_WAIT_H_
