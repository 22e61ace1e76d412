#ifndef LLMC_COMMON_CONFIG_CONFIG_LOADER_H_
#define LLMC_COMMON_CONFIG_CONFIG_LOADER_H_

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/config_field.h"
#include "yaml-cpp/yaml.h"

namespace llmc::config {

// A configuration file has one section per program; each binary reads its own and checks that the others
// are at least known names, so one file (one Kubernetes ConfigMap) can configure the whole cluster.
inline constexpr absl::string_view kConfigSections[] = {"controller", "worker", "gateway"};

struct ProgramInfo {
  absl::string_view name;         // "llmc-controller"
  absl::string_view section;      // "controller"
  absl::string_view description;  // one line for --help
};

enum class ConfigOutcome {
  kRun,   // configuration loaded and valid: go on
  kExit,  // --help or --print-config was answered on `out`: exit 0
};

// Loads configuration the way every llmc binary does: struct defaults, then the program's section of
// `--config FILE`, then `--key=value` / `--key value` / `--bool_key` flags, then `validate`. Every error
// names the offending key and where it came from.
absl::StatusOr<ConfigOutcome> LoadConfigFromArgs(const ProgramInfo& program, const std::vector<std::string>& args,
                                                 std::vector<ConfigField>& fields,
                                                 const std::function<absl::Status()>& validate, std::ostream& out);

template <typename Config>
absl::StatusOr<ConfigOutcome> LoadConfig(const ProgramInfo& program, int argc, const char* const* argv, Config& config,
                                         std::ostream& out = std::cout) {
  std::vector<ConfigField> fields = CollectConfigFields(config);
  std::vector<std::string> args(argv + 1, argv + argc);
  return LoadConfigFromArgs(
      program, args, fields, [&config] { return config.Validate(); }, out);
}

// Applies `section` of a parsed document; `source` names the file in errors.
absl::Status ApplyYamlDocument(const YAML::Node& root, absl::string_view source, absl::string_view section,
                               std::vector<ConfigField>& fields);

// Parses `text` as YAML and applies its `section`; syntax and type errors are INVALID_ARGUMENT naming
// `source`. Never throws.
absl::Status ApplyYamlText(absl::string_view text, absl::string_view source, absl::string_view section,
                           std::vector<ConfigField>& fields);

// The fields as a YAML document with the program's section, loadable with --config.
std::string RenderConfigYaml(absl::string_view section, const std::vector<ConfigField>& fields);

std::string RenderHelp(const ProgramInfo& program, const std::vector<ConfigField>& fields);

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_CONFIG_LOADER_H_
