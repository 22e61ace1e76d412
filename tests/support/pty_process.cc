#include "tests/support/pty_process.h"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "absl/time/clock.h"

namespace llmc::testing {
namespace {

int ExitCodeOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

PtyProcess::PtyProcess(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<std::string> argv_storage{binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  struct winsize size = {};
  size.ws_row = 40;
  size.ws_col = 200;
  const pid_t parent = getpid();
  pid_ = forkpty(&master_fd_, nullptr, nullptr, &size);
  if (pid_ < 0) throw std::runtime_error("forkpty failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
}

PtyProcess::~PtyProcess() {
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (master_fd_ >= 0) close(master_fd_);
}

void PtyProcess::Type(absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = write(master_fd_, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
}

bool PtyProcess::ReadSome(absl::Duration timeout) {
  struct pollfd poll_fd = {master_fd_, POLLIN, 0};
  const int ready = poll(&poll_fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (ready <= 0) return ready == 0 || errno == EINTR;
  char buffer[4096];
  const ssize_t got = read(master_fd_, buffer, sizeof(buffer));
  if (got <= 0) return got < 0 && errno == EINTR;  // EIO: the slave side is closed
  output_.append(buffer, static_cast<size_t>(got));
  return true;
}

bool PtyProcess::WaitFor(absl::string_view text, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t found = output_.find(text.data(), mark_, text.size());
    if (found != std::string::npos) {
      mark_ = found + text.size();
      return true;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    if (!ReadSome(std::min(left, absl::Milliseconds(100)))) return false;
  }
}

std::optional<int> PtyProcess::WaitForExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!exit_code_) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = ExitCodeOf(status);
      break;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    if (!ReadSome(absl::Milliseconds(50))) absl::SleepFor(absl::Milliseconds(20));
  }
  return exit_code_;
}

}  // namespace llmc::testing
