#include "tests/support/metrics_text.h"

#include <cstdlib>
#include <sstream>

#include "tests/support/http_get.h"

namespace llmc::testing {

std::optional<double> MetricSum(const std::string& text, const std::string& name, const MetricLabels& labels) {
  std::optional<double> sum;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos || line.compare(0, name_end, name) != 0 || name_end != name.size()) continue;
    std::string label_text;
    size_t value_start = name_end;
    if (line[name_end] == '{') {
      const size_t close = line.find('}', name_end);
      if (close == std::string::npos) continue;
      label_text = line.substr(name_end + 1, close - name_end - 1);
      value_start = close + 1;
    }
    bool matches = true;
    for (const auto& [key, value] : labels) {
      const std::string wanted = key + "=\"" + value + "\"";
      const size_t at = label_text.find(wanted);
      // Whole label only: at the start or after a comma.
      if (at == std::string::npos || (at != 0 && label_text[at - 1] != ',')) matches = false;
    }
    if (!matches) continue;
    sum = sum.value_or(0) + std::strtod(line.c_str() + value_start, nullptr);
  }
  return sum;
}

std::optional<double> ScrapeMetric(int port, const std::string& name, const MetricLabels& labels) {
  const HttpResponse response = HttpGet("127.0.0.1", port, "/metrics");
  if (response.status != 200) return std::nullopt;
  return MetricSum(response.body, name, labels);
}

}  // namespace llmc::testing
