#ifndef LLMC_TESTS_SUPPORT_CHILD_PROCESS_H_
#define LLMC_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace llmc::testing {

// A real binary started by a test, with stdout and stderr going to a log file. It dies with the test
// process (PR_SET_PDEATHSIG) and is killed and reaped when the object goes away.
class ChildProcess {
 public:
  // Throws std::runtime_error when the process cannot be started. `environment` (NAME=VALUE entries) is
  // added to this process's environment.
  ChildProcess(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
               const std::vector<std::string>& environment = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void Signal(int signal_number);
  // Sends SIGSTOP and waits until every thread has stopped: the kernel stops a process's threads only as
  // they are scheduled, so on a loaded machine a thread may still serve for a moment after kill() returns.
  // False when it did not stop within `timeout` (or is not running).
  bool StopAndWait(absl::Duration timeout);
  // The exit code (128 + signal when killed by one), or nullopt if still running after `timeout`.
  std::optional<int> WaitForExit(absl::Duration timeout);
  bool running();
  std::string ReadLog() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a binary to completion (bounded by `timeout`; killed past it) and returns its exit code and output.
CommandResult RunCommand(const std::string& binary, const std::vector<std::string>& args,
                         absl::Duration timeout = absl::Seconds(30));

// A fresh directory under the system temp dir for one test's files.
std::string MakeTempDir(const std::string& prefix);

// Removes a file or a directory tree, not following links; whether the path is gone (true for one that never
// existed). Not
// std::filesystem::remove_all: where PyPI's libtorch is linked with a static libstdc++ (the GPU machine), the
// program's calls bind to the copy libtorch exports, which crashed there when called at exit.
bool RemoveTree(const std::string& path);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CHILD_PROCESS_H_
