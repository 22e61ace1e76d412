#ifndef LLMC_TOOLS_CHAT_INTERRUPT_SIGNAL_H_
#define LLMC_TOOLS_CHAT_INTERRUPT_SIGNAL_H_

#include <csignal>
#include <memory>

#include "absl/status/statusor.h"

namespace llmc::chat {

// SIGINT (Ctrl-C) as an event the main loop can wait on. The handler only sets an atomic flag and writes a
// byte to a self-pipe, so poll() or an Asio wait on fd() wakes at once, whatever the program is blocked on.
// One instance per process; the previous handler comes back when it goes away.
class InterruptSignal {
 public:
  static absl::StatusOr<std::unique_ptr<InterruptSignal>> Install();
  ~InterruptSignal();
  InterruptSignal(const InterruptSignal&) = delete;
  InterruptSignal& operator=(const InterruptSignal&) = delete;

  // Readable while an interrupt is pending (until Take()).
  int fd() const { return read_fd_; }
  // Whether an interrupt arrived since the last call; clears it.
  bool Take();

 private:
  InterruptSignal(int read_fd, int write_fd) : read_fd_(read_fd), write_fd_(write_fd) {}

  int read_fd_;
  int write_fd_;
  struct sigaction previous_ = {};
};

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_INTERRUPT_SIGNAL_H_
