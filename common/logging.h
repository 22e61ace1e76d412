#ifndef LLMC_COMMON_LOGGING_H_
#define LLMC_COMMON_LOGGING_H_

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
void SetMinLogLevel(LogLevel level);
bool LogLevelEnabled(LogLevel level);
// The name printed on every line ("controller", "worker", ...).
void SetLogProcessName(absl::string_view name);

// Key-value pairs printed on every line logged by this thread while the object lives, e.g. the
// request id while a request is handled. Nested contexts add up.
class ScopedLogContext {
 public:
  ScopedLogContext(std::string key, std::string value);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  size_t depth_;
};

// One log line, written to stderr in one write when destroyed:
//   2026-11-22T02:30:00.123456Z I controller registry.cc:42] worker_id=w1 registered address=...
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;

  // Adds a key=value field to this line only.
  LogMessage& With(absl::string_view key, absl::string_view value);

  template <typename T>
  LogMessage& operator<<(const T& value) {
    message_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::vector<std::pair<std::string, std::string>> fields_;
  std::ostringstream message_;
};

}  // namespace llmc

#define LLMC_LOG(severity)                                       \
  if (!::llmc::LogLevelEnabled(::llmc::LogLevel::k##severity)) { \
  } else                                                         \
    ::llmc::LogMessage(::llmc::LogLevel::k##severity, __FILE__, __LINE__)

#endif  // LLMC_COMMON_LOGGING_H_
