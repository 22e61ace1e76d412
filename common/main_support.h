#ifndef LLMC_COMMON_MAIN_SUPPORT_H_
#define LLMC_COMMON_MAIN_SUPPORT_H_

#include <iostream>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "common/config/config_loader.h"
#include "common/logging.h"

namespace llmc {

// What every main does first: load and validate configuration from flags and --config, answer --help and
// --print-config, and set up logging. Returns the exit code when main should stop here.
//
// It also turns off Abseil's Mutex deadlock detection, which Debian's build leaves on: it keeps one
// process-wide lock-order graph under its own lock, so every nested lock costs about 3x and threads contend
// for it. The test binaries keep it on, where it catches lock-order inversions.
template <typename Config>
std::optional<int> LoadConfigOrExit(const config::ProgramInfo& program, int argc, char** argv, Config& config) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto outcome = config::LoadConfig(program, argc, argv, config);
  if (!outcome.ok()) {
    std::cerr << program.name << ": " << outcome.status().message() << "\n";
    return 2;
  }
  if (*outcome == config::ConfigOutcome::kExit) return 0;
  SetLogProcessName(program.section);
  SetMinLogLevel(ParseLogLevel(config.log_level).value_or(LogLevel::kInfo));
  return std::nullopt;
}

}  // namespace llmc

#endif  // LLMC_COMMON_MAIN_SUPPORT_H_
