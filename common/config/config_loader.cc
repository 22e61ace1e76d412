#include "common/config/config_loader.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace llmc::config {
namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean X?)" when a known name is close to `name`, else "".
std::string Suggestion(absl::string_view name, const std::vector<std::string>& known, absl::string_view prefix) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(3, name.size() / 3) + 1;
  for (const auto& candidate : known) {
    const size_t distance = EditDistance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = &candidate;
    }
  }
  return best ? absl::StrCat(" (did you mean ", prefix, *best, "?)") : "";
}

std::vector<std::string> FieldKeys(const std::vector<ConfigField>& fields) {
  std::vector<std::string> keys;
  for (const auto& field : fields) keys.push_back(field.key);
  return keys;
}

ConfigField* FindField(std::vector<ConfigField>& fields, absl::string_view key) {
  for (auto& field : fields) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

bool IsFieldGroup(const std::vector<ConfigField>& fields, absl::string_view prefix) {
  return std::any_of(fields.begin(), fields.end(),
                     [&](const ConfigField& field) { return absl::StartsWith(field.key, absl::StrCat(prefix, ".")); });
}

absl::Status ApplyYamlMap(const YAML::Node& map, const std::string& prefix, absl::string_view where,
                          std::vector<ConfigField>& fields) {
  for (const auto& entry : map) {
    const std::string name = entry.first.as<std::string>();
    const std::string key = prefix.empty() ? name : absl::StrCat(prefix, ".", name);
    const YAML::Node& value = entry.second;
    const std::string location = absl::StrCat(where, ".", key);
    if (ConfigField* field = FindField(fields, key)) {
      if (value.IsSequence() && field->is_list) {
        std::vector<std::string> items;
        for (const auto& item : value) {
          if (!item.IsScalar())
            return absl::InvalidArgumentError(absl::StrCat(location, ": list items must be scalars"));
          items.push_back(item.Scalar());
        }
        RETURN_IF_ERROR(field->set_from_list(items));
      } else if (value.IsScalar()) {
        RETURN_IF_ERROR(Annotate(field->set_from_text(value.Scalar()), location));
      } else {
        return absl::InvalidArgumentError(absl::StrCat(location, ": expected a ", field->type_name, " value, got ",
                                                       value.IsMap()    ? "a mapping"
                                                       : value.IsNull() ? "nothing"
                                                                        : "a list"));
      }
    } else if (IsFieldGroup(fields, key)) {
      if (!value.IsMap()) return absl::InvalidArgumentError(absl::StrCat(location, ": expected a mapping"));
      RETURN_IF_ERROR(ApplyYamlMap(value, key, where, fields));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(location, ": unknown key", Suggestion(key, FieldKeys(fields), "")));
    }
  }
  return absl::OkStatus();
}

absl::Status LoadYamlFile(const std::string& path, absl::string_view section, std::vector<ConfigField>& fields) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read config file '", path, "'"));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return absl::NotFoundError(absl::StrCat("cannot read config file '", path, "'"));
  return ApplyYamlText(text.str(), path, section, fields);
}

struct CommandLine {
  std::optional<std::string> config_path;
  bool help = false;
  bool print_config = false;
};

}  // namespace

absl::Status ApplyYamlDocument(const YAML::Node& root, absl::string_view source, absl::string_view section,
                               std::vector<ConfigField>& fields) {
  if (!root || root.IsNull()) return absl::OkStatus();  // an empty file configures nothing
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a mapping with sections ", absl::StrJoin(kConfigSections, ", ")));
  }
  std::vector<std::string> known_sections(std::begin(kConfigSections), std::end(kConfigSections));
  for (const auto& entry : root) {
    const std::string name = entry.first.as<std::string>();
    if (std::find(known_sections.begin(), known_sections.end(), name) == known_sections.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", name, ": unknown section", Suggestion(name, known_sections, "")));
    }
  }
  const YAML::Node node = root[std::string(section)];
  if (!node || node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", section, ": expected a mapping"));
  return ApplyYamlMap(node, "", absl::StrCat(source, ": ", section), fields);
}

absl::Status ApplyYamlText(absl::string_view text, absl::string_view source, absl::string_view section,
                           std::vector<ConfigField>& fields) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": YAML syntax error: ", error.what()));
  }
  try {
    return ApplyYamlDocument(root, source, section, fields);
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", error.what()));
  }
}

std::string RenderConfigYaml(absl::string_view section, const std::vector<ConfigField>& fields) {
  YAML::Node body(YAML::NodeType::Map);
  for (const auto& field : fields) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t dot = field.key.find('.'); dot != std::string::npos; dot = field.key.find('.', start)) {
      parts.push_back(field.key.substr(start, dot - start));
      start = dot + 1;
    }
    // yaml-cpp nodes are handles: walking down by reassignment would rebind, so keep a chain.
    std::vector<YAML::Node> chain{body};
    for (const auto& part : parts) chain.push_back(chain.back()[part]);
    chain.back()[field.key.substr(start)] = field.to_yaml();
  }
  YAML::Node root;
  root[std::string(section)] = body;
  YAML::Emitter emitter;
  emitter << root;
  return std::string(emitter.c_str()) + "\n";
}

std::string RenderHelp(const ProgramInfo& program, const std::vector<ConfigField>& fields) {
  std::string text = absl::StrCat(
      program.name, ": ", program.description, "\n\nUsage: ", program.name, " [--config=FILE] [--KEY=VALUE ...]\n\n",
      "  --config=FILE\n      YAML file; this program reads its '", program.section, ":' section\n",
      "  --print-config\n      print the effective configuration as YAML and exit\n",
      "  --help\n      show this help and exit\n\n", "Configuration keys (flags override the file):\n");
  for (const auto& field : fields) {
    absl::StrAppend(&text, "  --", field.key, "=<", field.type_name, ">  (default: ", field.format(), ")\n      ",
                    field.help, "\n");
  }
  return text;
}

absl::StatusOr<ConfigOutcome> LoadConfigFromArgs(const ProgramInfo& program, const std::vector<std::string>& args,
                                                 std::vector<ConfigField>& fields,
                                                 const std::function<absl::Status()>& validate, std::ostream& out) {
  CommandLine command_line;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      command_line.help = true;
      continue;
    }
    if (arg == "--print-config" || arg == "--print_config") {
      command_line.print_config = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "' (flags look like --key=value)"));
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    std::optional<std::string> value;
    if (equals != std::string::npos) value = arg.substr(equals + 1);
    if (name == "config") {
      if (!value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError("--config needs a file path");
        value = args[++i];
      }
      command_line.config_path = *value;
      continue;
    }
    const ConfigField* field = FindField(fields, name);
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, Suggestion(name, FieldKeys(fields), "--"), "; see --help"));
    }
    if (!value) {
      if (field->is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    overrides.emplace_back(name, *value);
  }

  if (command_line.help) {
    out << RenderHelp(program, fields);
    return ConfigOutcome::kExit;
  }
  if (command_line.config_path) {
    RETURN_IF_ERROR(LoadYamlFile(*command_line.config_path, program.section, fields));
  }
  for (const auto& [name, value] : overrides) {
    RETURN_IF_ERROR(Annotate(FindField(fields, name)->set_from_text(value), absl::StrCat("--", name)));
  }
  RETURN_IF_ERROR(Annotate(validate(), "invalid configuration"));
  if (command_line.print_config) {
    out << RenderConfigYaml(program.section, fields);
    return ConfigOutcome::kExit;
  }
  return ConfigOutcome::kRun;
}

}  // namespace llmc::config
