#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace llmc {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

absl::Mutex g_name_mu(absl::kConstInit);
std::string* g_process_name ABSL_GUARDED_BY(g_name_mu) = nullptr;

std::vector<std::pair<std::string, std::string>>& ThreadContext() {
  thread_local std::vector<std::pair<std::string, std::string>> context;
  return context;
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

// Control characters as \n, \r, \t or \xNN; with `quoted`, also `"` and `\`. Bytes from 0x80 up pass
// through, so UTF-8 text stays readable.
void AppendEscaped(std::string& line, absl::string_view text, bool quoted) {
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\r') {
      line += "\\r";
    } else if (c == '\t') {
      line += "\\t";
    } else if (IsControl(c)) {
      static constexpr char kHex[] = "0123456789abcdef";
      line += "\\x";
      line += kHex[c >> 4];
      line += kHex[c & 0xf];
    } else if (quoted && (c == '"' || c == '\\')) {
      line += '\\';
      line += ch;
    } else {
      line += ch;
    }
  }
}

// One key=value field. A value that is empty or holds a space, `"`, `=`, `\` or a control character is quoted
// and escaped, so that a client's text (a request id, a model name) can neither start a new line nor forge
// another field: lines stay machine-splittable.
void AppendField(std::string& line, absl::string_view key, absl::string_view value) {
  line += ' ';
  for (const char ch : key) {
    const unsigned char c = static_cast<unsigned char>(ch);
    line += (IsControl(c) || c == ' ' || c == '=' || c == '"') ? '_' : ch;
  }
  line += '=';
  bool quote = value.empty();
  for (const char ch : value) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (IsControl(c) || c == ' ' || c == '"' || c == '=' || c == '\\') {
      quote = true;
      break;
    }
  }
  if (!quote) {
    line.append(value.data(), value.size());
    return;
  }
  line += '"';
  AppendEscaped(line, value, /*quoted=*/true);
  line += '"';
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level '", name, "' (expected debug, info, warning or error)"));
}

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

bool LogLevelEnabled(LogLevel level) { return static_cast<int>(level) >= g_min_level.load(); }

void SetLogProcessName(absl::string_view name) {
  absl::MutexLock lock(&g_name_mu);
  delete g_process_name;
  g_process_name = new std::string(name);
}

ScopedLogContext::ScopedLogContext(std::string key, std::string value) : depth_(ThreadContext().size()) {
  ThreadContext().emplace_back(std::move(key), std::move(value));
}

ScopedLogContext::~ScopedLogContext() { ThreadContext().resize(depth_); }

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}

LogMessage& LogMessage::With(absl::string_view key, absl::string_view value) {
  fields_.emplace_back(std::string(key), std::string(value));
  return *this;
}

LogMessage::~LogMessage() {
  const char* base = std::strrchr(file_, '/');
  std::string line = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
  absl::StrAppend(&line, " ", std::string(1, LevelLetter(level_)), " ");
  {
    absl::MutexLock lock(&g_name_mu);
    absl::StrAppend(&line, g_process_name ? *g_process_name : "llmc");
  }
  absl::StrAppend(&line, " ", base ? base + 1 : file_, ":", line_, "]");
  for (const auto& [key, value] : ThreadContext()) AppendField(line, key, value);
  for (const auto& [key, value] : fields_) AppendField(line, key, value);
  // The message may quote a client's text too: control characters are escaped, so one call is one line.
  line += ' ';
  AppendEscaped(line, message_.str(), /*quoted=*/false);
  line += '\n';
  // One write() per line keeps lines from different threads whole.
  size_t written = 0;
  while (written < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + written, line.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
}

}  // namespace llmc
