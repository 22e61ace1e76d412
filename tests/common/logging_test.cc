#include "common/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace llmc
