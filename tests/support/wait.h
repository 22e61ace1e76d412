#ifndef LLMC_TESTS_SUPPORT_WAIT_H_
#define LLMC_TESTS_SUPPORT_WAIT_H_

#include <functional>

#include "absl/time/time.h"

namespace llmc::testing {

// Polls `condition` until it holds or `timeout` passes; true when it held. Every wait in tests is bounded.
bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout,
               absl::Duration poll_interval = absl::Milliseconds(20));

// A loopback TCP port that was free a moment ago, chosen at random below the kernel's ephemeral range.
int PickFreePort();

// True when a TCP connection to 127.0.0.1:`port` is accepted right now.
bool LoopbackPortAccepts(int port);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_WAIT_H_
