#ifndef LLMC_TESTS_SUPPORT_PTY_PROCESS_H_
#define LLMC_TESTS_SUPPORT_PTY_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace llmc::testing {

// A binary run on a pseudo-terminal, as a user at a terminal would run it: its stdin, stdout and stderr are
// the terminal's slave side, and the test types on the master side (so Ctrl-C, byte 0x03, reaches the
// program as SIGINT through the terminal's line discipline). Killed and reaped when the object goes away.
class PtyProcess {
 public:
  // Throws std::runtime_error when the terminal or the process cannot be made.
  PtyProcess(const std::string& binary, const std::vector<std::string>& args);
  ~PtyProcess();
  PtyProcess(const PtyProcess&) = delete;
  PtyProcess& operator=(const PtyProcess&) = delete;

  void Type(absl::string_view bytes);
  // Reads the terminal until what it showed since the last mark contains `text` (true), or `timeout` passed
  // or the program closed the terminal (false). On success the mark moves past the match.
  bool WaitFor(absl::string_view text, absl::Duration timeout);
  // What the terminal showed since the last mark (not consumed).
  std::string SinceMark() const { return output_.substr(mark_); }
  // Everything the terminal showed.
  const std::string& output() const { return output_; }
  // The exit code (128 + signal when killed by one), or nullopt if still running after `timeout`; reads
  // the terminal meanwhile so the program never blocks writing to it.
  std::optional<int> WaitForExit(absl::Duration timeout);

 private:
  // Appends what arrives within `timeout`; false when the terminal is closed.
  bool ReadSome(absl::Duration timeout);

  pid_t pid_ = -1;
  int master_fd_ = -1;
  std::string output_;
  size_t mark_ = 0;
  std::optional<int> exit_code_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_PTY_PROCESS_H_
