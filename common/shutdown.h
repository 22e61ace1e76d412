#ifndef LLMC_COMMON_SHUTDOWN_H_
#define LLMC_COMMON_SHUTDOWN_H_

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace llmc {

// Turns SIGINT and SIGTERM into a notification that main waits on, so shutdown runs as ordinary code on
// an ordinary thread instead of inside a signal handler. A second signal ends the process at once.
//
// Construct it first in main, before any other thread starts: it blocks both signals for the calling
// thread, and threads started afterwards inherit the mask, so only its watcher thread receives them.
class ShutdownSignal {
 public:
  ShutdownSignal();
  ~ShutdownSignal();
  ShutdownSignal(const ShutdownSignal&) = delete;
  ShutdownSignal& operator=(const ShutdownSignal&) = delete;

  // Blocks until a signal arrives or Request() is called; returns the signal number, 0 for Request().
  int Wait();
  // As Wait(), giving up after `timeout`; true when shutdown was asked for.
  bool WaitFor(absl::Duration timeout);
  // Asks for shutdown from code (tests, fatal errors in a component).
  void Request();
  bool requested() const { return requested_.HasBeenNotified(); }

 private:
  void WatchSignals();

  absl::Notification requested_;
  std::atomic<int> signal_number_{0};
  std::atomic<bool> stop_watching_{false};
  std::thread watcher_;
};

}  // namespace llmc

#endif  // LLMC_COMMON_SHUTDOWN_H_
