#ifndef LLMC_TESTS_JINJA_PARITY_SUPPORT_H_
#define LLMC_TESTS_JINJA_PARITY_SUPPORT_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace llmc::jinja::testing {

struct ParityCase {
  std::string name;
  std::string source;
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
};

// Renders every case with python3-jinja2 set up as transformers does (tests/jinja/render_reference.py)
// and returns its results, one JSON object per case.
std::vector<nlohmann::ordered_json> RenderWithJinja2(const std::vector<ParityCase>& cases);

// Renders every case with llmc::jinja and checks it against `expected`: byte-identical output, the same
// raise_exception() message, or an error where jinja2 fails. Returns how many cases matched.
int CheckParity(const std::vector<ParityCase>& cases, const std::vector<nlohmann::ordered_json>& expected);

std::string ReadFile(const std::string& path);

// The snippets of tests/jinja/snippets.txt: "### name" starts one, an optional "#context: {json}" line
// follows, and the template is everything up to the next "### " line, less its final newline.
std::vector<ParityCase> LoadSnippets(const std::string& path, const nlohmann::ordered_json& default_context);

}  // namespace llmc::jinja::testing

#endif  // LLMC_TESTS_JINJA_PARITY_SUPPORT_H_
