#include "tools/chat/interrupt_signal.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace llmc::chat {
namespace {

std::atomic<int> g_write_fd{-1};
std::atomic<bool> g_pending{false};

void OnInterrupt(int) {
  const int saved_errno = errno;
  g_pending.store(true);
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const char byte = 'i';
    // A full pipe already says "pending"; the result does not matter.
    [[maybe_unused]] const ssize_t ignored = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

absl::StatusOr<std::unique_ptr<InterruptSignal>> InterruptSignal::Install() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  std::unique_ptr<InterruptSignal> signal(new InterruptSignal(fds[0], fds[1]));
  g_pending.store(false);
  g_write_fd.store(fds[1]);
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a blocking call returns EINTR, though every wait here also watches the pipe.
  action.sa_flags = 0;
  if (sigaction(SIGINT, &action, &signal->previous_) != 0) {
    return absl::InternalError(absl::StrCat("sigaction(SIGINT): ", std::strerror(errno)));
  }
  return signal;
}

InterruptSignal::~InterruptSignal() {
  sigaction(SIGINT, &previous_, nullptr);
  g_write_fd.store(-1);
  close(read_fd_);
  close(write_fd_);
}

bool InterruptSignal::Take() {
  char buffer[64];
  while (read(read_fd_, buffer, sizeof(buffer)) > 0) {
  }
  return g_pending.exchange(false);
}

}  // namespace llmc::chat
