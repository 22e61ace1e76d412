#include "tests/jinja/parity_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "tests/support/catch.h"
#include "worker/jinja/template.h"

namespace llmc::jinja::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<nlohmann::ordered_json> RenderWithJinja2(const std::vector<ParityCase>& cases) {
  nlohmann::ordered_json input = nlohmann::ordered_json::array();
  for (const ParityCase& c : cases) input.push_back({{"template", c.source}, {"context", c.context}});
  char path[] = "/tmp/llmc_jinja_cases_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  const std::string text = input.dump();
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("write failed");
  close(fd);
  const std::string command =
      std::string(LLMC_PYTHON) + " " + LLMC_SOURCE_DIR + "/tests/jinja/render_reference.py " + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + command);
  std::string output;
  char buffer[65536];
  size_t read;
  while ((read = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, read);
  const int status = pclose(pipe);
  unlink(path);
  if (status != 0) throw std::runtime_error("reference renderer failed (needs python3-jinja2): " + output);
  auto results = nlohmann::ordered_json::parse(output);
  return std::vector<nlohmann::ordered_json>(results.begin(), results.end());
}

int CheckParity(const std::vector<ParityCase>& cases, const std::vector<nlohmann::ordered_json>& expected) {
  REQUIRE(cases.size() == expected.size());
  RenderOptions options;
  options.now = absl::FromCivil(absl::CivilSecond(2025, 3, 4, 5, 6, 7), absl::UTCTimeZone());
  options.time_zone = absl::UTCTimeZone();
  int matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const ParityCase& c = cases[i];
    const nlohmann::ordered_json& want = expected[i];
    INFO("case: " << c.name << "\ntemplate:\n" << c.source << "\njinja2: " << want.dump());
    auto parsed = Template::Parse(c.source, ParseOptions());
    absl::StatusOr<std::string> got =
        parsed.ok() ? (*parsed)->Render(c.context, options) : absl::StatusOr<std::string>(parsed.status());
    INFO("llmc: " << (got.ok() ? nlohmann::ordered_json(*got).dump() : got.status().ToString()));
    bool same;
    if (want["ok"].get<bool>()) {
      same = got.ok() && *got == want["output"].get<std::string>();
    } else if (want["raised"].get<bool>()) {
      same =
          !got.ok() && IsRaisedByTemplate(got.status()) && got.status().message() == want["message"].get<std::string>();
    } else {
      same = !got.ok() && !IsRaisedByTemplate(got.status());
    }
    CHECK(same);
    if (same) ++matched;
  }
  return matched;
}

std::vector<ParityCase> LoadSnippets(const std::string& path, const nlohmann::ordered_json& default_context) {
  std::vector<ParityCase> cases;
  std::istringstream in(ReadFile(path));
  std::string line;
  ParityCase* current = nullptr;
  bool first_line = false;
  auto finish = [&]() {
    if (current != nullptr && !current->source.empty() && current->source.back() == '\n') current->source.pop_back();
  };
  while (std::getline(in, line)) {
    if (line.rfind("### ", 0) == 0) {
      finish();
      cases.push_back(ParityCase{line.substr(4), "", default_context});
      current = &cases.back();
      first_line = true;
      continue;
    }
    if (current == nullptr) continue;
    if (first_line && line.rfind("#context: ", 0) == 0) {
      const nlohmann::ordered_json extra = nlohmann::ordered_json::parse(line.substr(10));
      for (auto& [key, value] : extra.items()) current->context[key] = value;
      continue;
    }
    first_line = false;
    current->source += line + "\n";
  }
  finish();
  return cases;
}

}  // namespace llmc::jinja::testing
