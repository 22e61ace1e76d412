#include "common/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/support/catch.h"
#include "tests/support/child_process.h"

namespace llmc {
namespace {

// Runs `body` with stderr sent to a file and returns what was written.
template <typename Body>
std::string CaptureStderr(Body body) {
  const std::string path = testing::MakeTempDir("llmc-log") + "/stderr.log";
  const int saved = dup(STDERR_FILENO);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, STDERR_FILENO);
  close(fd);
  body();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("logging: lines carry the process, thread context and per-line fields", "[unit][logging]") {
  SetLogProcessName("tester");
  const std::string output = CaptureStderr([] {
    ScopedLogContext worker("worker_id", "w-1");
    {
      ScopedLogContext request("request_id", "req 42");
      LLMC_LOG(Info).With("model", "m") << "admitted " << 3 << " tokens";
    }
    LLMC_LOG(Warning) << "after";
  });
  std::istringstream lines(output);
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  CHECK_THAT(first, Catch::Contains(" I tester logging_test.cc:"));
  CHECK_THAT(first, Catch::Contains("worker_id=w-1 request_id=\"req 42\" model=m admitted 3 tokens"));
  CHECK_THAT(second, Catch::Contains(" W tester "));
  CHECK_THAT(second, Catch::Contains("worker_id=w-1 after"));
  CHECK_THAT(second, !Catch::Contains("request_id"));
}

TEST_CASE("logging: lines below the minimum level are dropped", "[unit][logging]") {
  SetMinLogLevel(LogLevel::kWarning);
  const std::string output = CaptureStderr([] {
    LLMC_LOG(Info) << "hidden";
    LLMC_LOG(Error) << "shown";
  });
  SetMinLogLevel(LogLevel::kInfo);
  CHECK_THAT(output, !Catch::Contains("hidden"));
  CHECK_THAT(output, Catch::Contains("shown"));
  CHECK(ParseLogLevel("WARN").value() == LogLevel::kWarning);
  CHECK_FALSE(ParseLogLevel("loud").ok());
}

TEST_CASE("logging: a client's text in fields or the message cannot start a line or forge a field", "[unit][logging]") {
  SetLogProcessName("tester");
  const std::string output = CaptureStderr([] {
    LLMC_LOG(Info)
            .With("request_id", "r1\n2026-01-01T00:00:00Z E tester x.cc:1] forged=yes")
            .With("model", "a\"b\\c")
            .With("bad key", "\x1b[31mred")
            .With("plain", "m-1")
        << "model said:\r\nline two\x1b]0;title\x07 caf\xc3\xa9";
  });
  // One line, and only one newline: the one ending it.
  REQUIRE(output.find('\n') == output.size() - 1);
  CHECK(output.find('\r') == std::string::npos);
  CHECK(output.find('\x1b') == std::string::npos);
  CHECK(output.find('\x07') == std::string::npos);
  CHECK_THAT(output, Catch::Contains("request_id=\"r1\\n2026-01-01T00:00:00Z E tester x.cc:1] forged=yes\""));
  CHECK_THAT(output, Catch::Contains("model=\"a\\\"b\\\\c\""));
  CHECK_THAT(output, Catch::Contains("bad_key=\"\\x1b[31mred\""));
  CHECK_THAT(output, Catch::Contains("plain=m-1 "));
  CHECK_THAT(output, Catch::Contains("model said:\\r\\nline two\\x1b]0;title\\x07 caf\xc3\xa9"));
}

}  // namespace
}  // namespace llmc
