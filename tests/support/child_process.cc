#include "tests/support/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "absl/time/clock.h"

namespace llmc::testing {

ChildProcess::ChildProcess(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
                           const std::vector<std::string>& environment)
    : log_path_(log_path) {
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls are allowed.
  std::vector<std::string> argv_storage;
  argv_storage.push_back(binary);
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Entries of `environment` replace inherited ones of the same name.
  const auto overridden = [&environment](const char* entry) {
    const std::string_view text(entry);
    const std::string_view name = text.substr(0, text.find('='));
    return std::any_of(environment.begin(), environment.end(), [name](const std::string& mine) {
      return std::string_view(mine).substr(0, mine.find('=')) == name;
    });
  };
  std::vector<char*> envp;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!overridden(*entry)) envp.push_back(*entry);
  }
  std::vector<std::string> environment_storage = environment;
  for (auto& entry : environment_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    // The test process may have blocked signals; the child must start with a clean mask.
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (running()) {
    kill(pid_, SIGKILL);
    WaitForExit(absl::Seconds(10));
  }
}

void ChildProcess::Signal(int signal_number) {
  if (running()) kill(pid_, signal_number);
}

bool ChildProcess::StopAndWait(absl::Duration timeout) {
  if (!running() || kill(pid_, SIGSTOP) != 0) return false;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    // The parent hears of a stop once the whole thread group has stopped.
    const pid_t done = waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (done == pid_ && WIFSTOPPED(status)) return true;
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    if (done < 0 || absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

bool ChildProcess::running() {
  if (exit_code_) return false;
  return !WaitForExit(absl::ZeroDuration()).has_value();
}

std::optional<int> ChildProcess::WaitForExit(absl::Duration timeout) {
  if (exit_code_) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (done < 0) return exit_code_ = -1;
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string ChildProcess::ReadLog() const {
  std::ifstream in(log_path_);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

CommandResult RunCommand(const std::string& binary, const std::vector<std::string>& args, absl::Duration timeout) {
  const std::string log = MakeTempDir("llmc-cmd") + "/output.log";
  ChildProcess child(binary, args, log);
  CommandResult result;
  if (auto code = child.WaitForExit(timeout)) {
    result.exit_code = *code;
  } else {
    child.Signal(SIGKILL);
    result.exit_code = child.WaitForExit(absl::Seconds(10)).value_or(-1);
  }
  result.output = child.ReadLog();
  return result;
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP) {
    rmdir(path);
  } else {
    unlink(path);
  }
  return 0;  // on: what cannot be removed stays, the rest goes
}

}  // namespace

bool RemoveTree(const std::string& path) {
  // Children before their folder (FTW_DEPTH); links are removed, not followed (FTW_PHYS).
  nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  struct stat left;
  return lstat(path.c_str(), &left) != 0 && errno == ENOENT;
}

namespace {

// One folder per test process for logs and scratch files, removed when the process exits unless
// LLMC_KEEP_TEST_FILES is set (to read the logs of a failure).
class TestRoot {
 public:
  TestRoot() {
    const char* base = getenv("TMPDIR");
    path_ = std::string(base && *base ? base : "/tmp") + "/llmc-tests-XXXXXX";
    if (mkdtemp(path_.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  }
  ~TestRoot() {
    if (getenv("LLMC_KEEP_TEST_FILES") == nullptr) {
      RemoveTree(path_);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  static TestRoot root;
  std::string pattern = root.path() + "/" + prefix + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

}  // namespace llmc::testing
