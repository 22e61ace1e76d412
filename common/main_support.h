#ifndef LLMC_COMMON_MAIN_SUPPORT_H_
#define LLMC_COMMON_MAIN_SUPPORT_H_

#include <iostream>
#include <optional>

#include "common/config/config_loader.h"
#include "common/logging.h"

namespace llmc {

// What every main does first: load and validate configuration from flags and --config, answer --help and
// --print-config, and set up logging. Returns the exit code when main should stop here.
template <typename Config>
std::optional<int> LoadConfigOrExit(const config::ProgramInfo& program, int argc, char** argv, Config& config) {
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
