#ifndef LLMC_COMMON_CONFIG_CONFIG_FIELD_H_
#define LLMC_COMMON_CONFIG_CONFIG_FIELD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "yaml-cpp/yaml.h"

namespace llmc::config {

// A configuration struct lists its fields once, and that list drives YAML loading, flag overrides,
// --print-config and --help:
//
//   struct ControllerConfig {
//     absl::Duration heartbeat_interval = absl::Seconds(2);
//     template <typename Visitor>
//     void VisitFields(Visitor& v) {
//       v("heartbeat_interval", heartbeat_interval, "How often workers report their load");
//     }
//     absl::Status Validate() const;
//   };
//
// Field types: bool, int32_t, int64_t, uint32_t, uint64_t, double, std::string, absl::Duration,
// std::vector<std::string>, and nested structs with their own VisitFields (keys joined with '.').

// Text form of each field type; Parse errors describe what was expected, without the key.
absl::Status ParseConfigValue(absl::string_view text, bool* out);
absl::Status ParseConfigValue(absl::string_view text, int32_t* out);
absl::Status ParseConfigValue(absl::string_view text, int64_t* out);
absl::Status ParseConfigValue(absl::string_view text, uint32_t* out);
absl::Status ParseConfigValue(absl::string_view text, uint64_t* out);
absl::Status ParseConfigValue(absl::string_view text, double* out);
absl::Status ParseConfigValue(absl::string_view text, std::string* out);
absl::Status ParseConfigValue(absl::string_view text, absl::Duration* out);
// A comma-separated list; YAML sequences are also accepted by the loader.
absl::Status ParseConfigValue(absl::string_view text, std::vector<std::string>* out);

std::string FormatConfigValue(bool value);
std::string FormatConfigValue(int32_t value);
std::string FormatConfigValue(int64_t value);
std::string FormatConfigValue(uint32_t value);
std::string FormatConfigValue(uint64_t value);
std::string FormatConfigValue(double value);
std::string FormatConfigValue(const std::string& value);
std::string FormatConfigValue(absl::Duration value);
std::string FormatConfigValue(const std::vector<std::string>& value);

absl::string_view ConfigTypeName(const bool*);
absl::string_view ConfigTypeName(const int32_t*);
absl::string_view ConfigTypeName(const int64_t*);
absl::string_view ConfigTypeName(const uint32_t*);
absl::string_view ConfigTypeName(const uint64_t*);
absl::string_view ConfigTypeName(const double*);
absl::string_view ConfigTypeName(const std::string*);
absl::string_view ConfigTypeName(const absl::Duration*);
absl::string_view ConfigTypeName(const std::vector<std::string>*);

// One field of a configuration struct, type-erased; valid while the struct lives.
struct ConfigField {
  std::string key;  // dotted path inside the program's section, e.g. "heartbeat_interval"
  std::string help;
  std::string type_name;
  bool is_bool = false;
  bool is_list = false;
  std::function<absl::Status(absl::string_view)> set_from_text;
  std::function<absl::Status(const std::vector<std::string>&)> set_from_list;  // lists only
  std::function<std::string()> format;
  std::function<YAML::Node()> to_yaml;
};

// Visitor that flattens a configuration struct into ConfigFields.
class ConfigFieldCollector {
 public:
  template <typename T>
  void operator()(absl::string_view key, T& value, absl::string_view help) {
    if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string> &&
                  !std::is_same_v<T, std::vector<std::string>> && !std::is_same_v<T, absl::Duration>) {
      const std::string saved = prefix_;
      prefix_ += std::string(key) + ".";
      value.VisitFields(*this);
      prefix_ = saved;
    } else {
      fields_.push_back(MakeField(prefix_ + std::string(key), value, help));
    }
  }

  std::vector<ConfigField> Take() { return std::move(fields_); }

 private:
  template <typename T>
  static ConfigField MakeField(std::string key, T& value, absl::string_view help) {
    ConfigField field;
    field.key = std::move(key);
    field.help = std::string(help);
    field.type_name = std::string(ConfigTypeName(&value));
    field.is_bool = std::is_same_v<T, bool>;
    field.is_list = std::is_same_v<T, std::vector<std::string>>;
    T* target = &value;
    field.set_from_text = [target](absl::string_view text) { return ParseConfigValue(text, target); };
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      field.set_from_list = [target](const std::vector<std::string>& items) {
        *target = items;
        return absl::OkStatus();
      };
      field.to_yaml = [target] {
        YAML::Node node(YAML::NodeType::Sequence);
        for (const auto& item : *target) node.push_back(item);
        return node;
      };
    } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, absl::Duration>) {
      field.to_yaml = [target] { return YAML::Node(FormatConfigValue(*target)); };
    } else {
      field.to_yaml = [target] { return YAML::Node(*target); };
    }
    field.format = [target] { return FormatConfigValue(*target); };
    return field;
  }

  std::string prefix_;
  std::vector<ConfigField> fields_;
};

template <typename Config>
std::vector<ConfigField> CollectConfigFields(Config& config) {
  ConfigFieldCollector collector;
  config.VisitFields(collector);
  return collector.Take();
}

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_CONFIG_FIELD_H_
