#include "tools/bench/compare_table.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/result_json.h"

namespace llmc::bench {
namespace {

using nlohmann::json;

// A number at a path of keys, if there is one.
std::optional<double> NumberAt(const json& results, std::initializer_list<const char*> keys) {
  const json* node = &results;
  for (const char* key : keys) {
    if (!node->is_object()) return std::nullopt;
    auto it = node->find(key);
    if (it == node->end()) return std::nullopt;
    node = &*it;
  }
  if (!node->is_number()) return std::nullopt;
  return node->get<double>();
}

std::string Format(std::optional<double> value, int decimals) {
  if (!value) return "-";
  return absl::StrFormat("%.*f", decimals, *value);
}

struct NumericRow {
  std::string name;
  std::vector<const char*> keys;
  int decimals;
};

}  // namespace

CompareTable BuildCompareTable(const std::vector<std::pair<std::string, json>>& results) {
  CompareTable table;
  const bool ratio = results.size() == 2;
  table.headers.push_back("metric");
  for (const auto& [path, result] : results) table.headers.push_back(SeriesName(result, path));
  if (ratio) table.headers.push_back("ratio");

  auto text_row = [&](const std::string& name, auto value_of) {
    std::vector<std::string> row{name};
    for (const auto& [path, result] : results) row.push_back(value_of(path, result));
    if (ratio) row.push_back("");
    table.rows.push_back(std::move(row));
  };
  text_row("file", [](const std::string& path, const json&) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  });
  text_row("model", [](const std::string&, const json& r) { return r.value("model", std::string("-")); });
  text_row("max concurrency", [](const std::string&, const json& r) {
    const int64_t limit = r.value("max_concurrency", int64_t{0});
    return limit > 0 ? absl::StrCat(limit) : std::string("unlimited");
  });
  text_row("request rate (req/s)", [](const std::string&, const json& r) {
    const json rate = r.value("request_rate", json("inf"));
    return rate.is_number() ? absl::StrFormat("%.2f", rate.get<double>()) : std::string("inf");
  });

  const std::vector<NumericRow> numeric = {
      {"completed", {"completed"}, 0},
      {"failed", {"failed"}, 0},
      {"duration (s)", {"duration_s"}, 2},
      {"request throughput (req/s)", {"request_throughput"}, 3},
      {"output throughput (tok/s)", {"output_throughput"}, 2},
      {"total token throughput (tok/s)", {"total_token_throughput"}, 2},
      {"request goodput (req/s)", {"request_goodput"}, 3},
      {"mean TTFT (ms)", {"ttft_ms", "mean"}, 2},
      {"median TTFT (ms)", {"ttft_ms", "median"}, 2},
      {"p90 TTFT (ms)", {"ttft_ms", "p90"}, 2},
      {"p99 TTFT (ms)", {"ttft_ms", "p99"}, 2},
      {"mean TPOT (ms)", {"tpot_ms", "mean"}, 2},
      {"median TPOT (ms)", {"tpot_ms", "median"}, 2},
      {"p90 TPOT (ms)", {"tpot_ms", "p90"}, 2},
      {"p99 TPOT (ms)", {"tpot_ms", "p99"}, 2},
      {"mean ITL (ms)", {"itl_ms", "mean"}, 2},
      {"median ITL (ms)", {"itl_ms", "median"}, 2},
      {"p90 ITL (ms)", {"itl_ms", "p90"}, 2},
      {"p99 ITL (ms)", {"itl_ms", "p99"}, 2},
      {"mean E2EL (ms)", {"e2el_ms", "mean"}, 2},
      {"median E2EL (ms)", {"e2el_ms", "median"}, 2},
      {"p90 E2EL (ms)", {"e2el_ms", "p90"}, 2},
      {"p99 E2EL (ms)", {"e2el_ms", "p99"}, 2},
  };
  for (const NumericRow& spec : numeric) {
    std::vector<std::string> row{spec.name};
    std::vector<std::optional<double>> values;
    for (const auto& [path, result] : results) {
      std::optional<double> value;
      switch (spec.keys.size()) {
        case 1:
          value = NumberAt(result, {spec.keys[0]});
          break;
        case 2:
          value = NumberAt(result, {spec.keys[0], spec.keys[1]});
          break;
      }
      values.push_back(value);
      row.push_back(Format(value, spec.decimals));
    }
    if (ratio) {
      const bool defined = values[0] && values[1] && *values[0] != 0;
      row.push_back(defined ? absl::StrFormat("%.2fx", *values[1] / *values[0]) : "-");
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string FormatTable(const CompareTable& table, bool markdown) {
  std::vector<size_t> widths(table.headers.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  measure(table.headers);
  for (const auto& row : table.rows) measure(row);
  auto render = [&](const std::vector<std::string>& row) {
    std::string line = markdown ? "|" : "";
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string padding(widths[i] - std::min(widths[i], cell.size()), ' ');
      // The metric name left-aligned, numbers right-aligned.
      const std::string aligned = i == 0 ? cell + padding : padding + cell;
      if (markdown) {
        absl::StrAppend(&line, " ", aligned, " |");
      } else {
        absl::StrAppend(&line, i == 0 ? "" : "  ", aligned);
      }
    }
    return line + "\n";
  };
  std::string text = render(table.headers);
  if (markdown) {
    std::string rule = "|";
    for (size_t i = 0; i < widths.size(); ++i) {
      absl::StrAppend(&rule, " ",
                      i == 0 ? std::string(std::max<size_t>(widths[i], 3), '-')
                             : std::string(std::max<size_t>(widths[i], 4) - 1, '-') + ":",
                      " |");
    }
    text += rule + "\n";
  } else {
    size_t total = 0;
    for (size_t w : widths) total += w + 2;
    text += std::string(total - 2, '-') + "\n";
  }
  for (const auto& row : table.rows) text += render(row);
  return text;
}

}  // namespace llmc::bench
