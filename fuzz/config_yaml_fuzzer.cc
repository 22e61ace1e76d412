// Fuzzes the YAML configuration loader every binary uses for --config: any text either applies or is a
// clear error (never an exception or a crash), and a configuration that applies and validates renders
// (--print-config) to YAML that loads back to the same configuration.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/config/config_loader.h"
#include "common/config/controller_config.h"
#include "common/config/gateway_config.h"
#include "common/config/worker_config.h"

namespace {

template <typename Config>
void CheckSection(absl::string_view text, absl::string_view section) {
  Config config;
  std::vector<llmc::config::ConfigField> fields = llmc::config::CollectConfigFields(config);
  if (!llmc::config::ApplyYamlText(text, "fuzz.yaml", section, fields).ok()) return;
  if (!config.Validate().ok()) return;
  const std::string rendered = llmc::config::RenderConfigYaml(section, fields);

  Config reloaded;
  std::vector<llmc::config::ConfigField> reloaded_fields = llmc::config::CollectConfigFields(reloaded);
  const absl::Status status = llmc::config::ApplyYamlText(rendered, "rendered.yaml", section, reloaded_fields);
  if (!status.ok()) {
    std::cerr << "rendered configuration does not load: " << status << "\n" << rendered;
    std::abort();
  }
  const std::string rerendered = llmc::config::RenderConfigYaml(section, reloaded_fields);
  if (rerendered != rendered) {
    std::cerr << "configuration changed on reload:\n" << rendered << "---\n" << rerendered;
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  CheckSection<llmc::config::ControllerConfig>(text, "controller");
  CheckSection<llmc::config::WorkerConfig>(text, "worker");
  CheckSection<llmc::config::GatewayConfig>(text, "gateway");
  return 0;
}
