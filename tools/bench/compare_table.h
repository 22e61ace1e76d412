#ifndef LLMC_TOOLS_BENCH_COMPARE_TABLE_H_
#define LLMC_TOOLS_BENCH_COMPARE_TABLE_H_

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace llmc::bench {

// A side-by-side table of result files: one column per file, one row per setting or metric; with exactly
// two files a last column gives the second's value divided by the first's.
struct CompareTable {
  std::vector<std::string> headers;            // "metric", then one per file (, "ratio")
  std::vector<std::vector<std::string>> rows;  // each as long as headers
};

// `results`: (file path, parsed result) pairs, in column order.
CompareTable BuildCompareTable(const std::vector<std::pair<std::string, nlohmann::json>>& results);

// Plain text with aligned columns, or a GitHub Markdown table.
std::string FormatTable(const CompareTable& table, bool markdown = false);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_COMPARE_TABLE_H_
