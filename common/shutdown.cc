#include "common/shutdown.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "common/logging.h"

namespace llmc {
namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

ShutdownSignal::ShutdownSignal() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  watcher_ = std::thread([this] { WatchSignals(); });
}

ShutdownSignal::~ShutdownSignal() {
  stop_watching_.store(true);
  watcher_.join();
}

void ShutdownSignal::WatchSignals() {
  const sigset_t set = ShutdownSignals();
  // Polls with a short timeout so the destructor can stop the thread without sending itself a signal.
  const timespec poll_interval{0, 100 * 1000 * 1000};
  while (!stop_watching_.load()) {
    const int signal_number = sigtimedwait(&set, nullptr, &poll_interval);
    if (signal_number < 0) continue;  // EAGAIN (timeout) or EINTR
    if (requested_.HasBeenNotified()) {
      LLMC_LOG(Warning) << "second signal " << signal_number << ": exiting now";
      _exit(128 + signal_number);
    }
    LLMC_LOG(Info) << "signal " << signal_number << " received: shutting down (send again to force)";
    signal_number_.store(signal_number);
    requested_.Notify();
  }
}

int ShutdownSignal::Wait() {
  requested_.WaitForNotification();
  return signal_number_.load();
}

bool ShutdownSignal::WaitFor(absl::Duration timeout) { return requested_.WaitForNotificationWithTimeout(timeout); }

void ShutdownSignal::Request() {
  if (!requested_.HasBeenNotified()) requested_.Notify();
}

}  // namespace llmc
