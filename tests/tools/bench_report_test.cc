// Unit tests of llmc-bench's reports: result JSON, the side-by-side compare table and the SVG plot (checked
// with a small XML well-formedness parser).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tools/bench/compare_table.h"
#include "tools/bench/result_json.h"
#include "tools/bench/svg_plot.h"

namespace llmc::bench {
namespace {

using nlohmann::json;

// A result as a run at `concurrency` would write it, with throughput and latencies scaled by `speed`.
json SyntheticResult(const std::string& label, int64_t concurrency, double speed) {
  std::vector<RequestResult> results;
  for (int i = 0; i < 10; ++i) {
    RequestResult r;
    r.success = true;
    r.ttft_s = 0.1 * (i + 1) / speed;
    r.latency_s = r.ttft_s + 1.0 / speed;
    r.output_tokens = 11;
    r.prompt_tokens = 100;
    r.itl_s = std::vector<double>(10, 0.1 / speed);
    results.push_back(r);
  }
  RunInfo info;
  info.label = label;
  info.model = "m";
  info.max_concurrency = concurrency;
  info.request_rate = INFINITY;
  info.num_prompts = 10;
  const BenchMetrics metrics = ComputeMetrics(results, 10.0 / (speed * static_cast<double>(concurrency)), {});
  return ResultsToJson(info, metrics);
}

// Checks that `text` is well-formed XML (one root, balanced and properly nested tags, quoted attributes,
// only known entities); returns the element names in document order.
std::vector<std::string> ParseXmlElements(const std::string& text) {
  std::vector<std::string> elements;
  std::vector<std::string> stack;
  size_t i = 0;
  int roots = 0;
  auto check_text = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) {
      if (text[k] == '<') FAIL("stray < at " << k);
      if (text[k] == '&') {
        const size_t end = text.find(';', k);
        REQUIRE(end != std::string::npos);
        const std::string entity = text.substr(k, end - k + 1);
        INFO("entity " << entity);
        REQUIRE(
            (entity == "&amp;" || entity == "&lt;" || entity == "&gt;" || entity == "&quot;" || entity == "&apos;"));
      }
    }
  };
  while (i < text.size()) {
    const size_t open = text.find('<', i);
    if (open == std::string::npos) {
      check_text(i, text.size());
      break;
    }
    check_text(i, open);
    const size_t close = text.find('>', open);
    REQUIRE(close != std::string::npos);
    std::string tag = text.substr(open + 1, close - open - 1);
    i = close + 1;
    if (tag.rfind("?xml", 0) == 0) continue;
    if (!tag.empty() && tag[0] == '/') {
      REQUIRE(!stack.empty());
      INFO("closing " << tag << " inside " << stack.back());
      REQUIRE(tag.substr(1) == stack.back());
      stack.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    const size_t name_end = tag.find_first_of(" \n\t");
    const std::string name = tag.substr(0, name_end);
    REQUIRE(!name.empty());
    // Attributes: name="value" pairs, values without < or unescaped quotes.
    std::string rest = name_end == std::string::npos ? "" : tag.substr(name_end);
    size_t k = 0;
    while (k < rest.size()) {
      if (rest[k] == ' ' || rest[k] == '\n') {
        ++k;
        continue;
      }
      const size_t equals = rest.find('=', k);
      REQUIRE(equals != std::string::npos);
      REQUIRE(equals + 1 < rest.size());
      REQUIRE(rest[equals + 1] == '"');
      const size_t end_quote = rest.find('"', equals + 2);
      REQUIRE(end_quote != std::string::npos);
      for (size_t c = equals + 2; c < end_quote; ++c) {
        REQUIRE(rest[c] != '<');
        if (rest[c] == '&') {
          const std::string entity = rest.substr(c, rest.find(';', c) - c + 1);
          REQUIRE((entity == "&amp;" || entity == "&lt;" || entity == "&gt;" || entity == "&quot;"));
        }
      }
      k = end_quote + 1;
    }
    if (stack.empty()) ++roots;
    elements.push_back(name);
    if (!self_closing) stack.push_back(name);
  }
  CHECK(stack.empty());
  CHECK(roots == 1);
  return elements;
}

size_t CountOf(const std::vector<std::string>& elements, const std::string& name) {
  return static_cast<size_t>(std::count(elements.begin(), elements.end(), name));
}

TEST_CASE("result JSON holds settings, metrics and latency summaries", "[unit]") {
  const json result = SyntheticResult("cb", 4, 2.0);
  CHECK(result["tool"] == "llmc-bench");
  CHECK(result["label"] == "cb");
  CHECK(result["request_rate"] == "inf");
  CHECK(result["max_concurrency"] == 4);
  CHECK(result["completed"] == 10);
  CHECK(result["total_output_tokens"] == 110);
  CHECK(result["output_throughput"].get<double>() == Approx(110 / 1.25));
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
    for (const char* key : {"mean", "median", "p50", "p90", "p99", "std", "min", "max", "count"}) {
      INFO(metric << "." << key);
      CHECK(result[metric].contains(key));
    }
  }
  CHECK(result["ttft_ms"]["median"].get<double>() == Approx(275));
  CHECK(result["request_goodput"].is_null());
  CHECK(ConcurrencyOf(result) == 4);
  CHECK(SeriesName(result, "/x/y.json") == "cb");
  json unlabeled = result;
  unlabeled["label"] = "";
  unlabeled["max_concurrency"] = 0;
  CHECK(SeriesName(unlabeled, "/x/y.json") == "y.json");
  CHECK(ConcurrencyOf(unlabeled) == 10);  // unlimited: every prompt at once
}

TEST_CASE("compare puts result files side by side with a ratio for two", "[unit]") {
  const std::vector<std::pair<std::string, json>> results = {{"a.json", SyntheticResult("one-at-a-time", 16, 1.0)},
                                                             {"b.json", SyntheticResult("continuous", 16, 4.0)}};
  const CompareTable table = BuildCompareTable(results);
  REQUIRE(table.headers == std::vector<std::string>{"metric", "one-at-a-time", "continuous", "ratio"});
  std::map<std::string, std::vector<std::string>> rows;
  for (const auto& row : table.rows) {
    REQUIRE(row.size() == 4);
    rows[row[0]] = row;
  }
  CHECK(rows.at("file") == std::vector<std::string>{"file", "a.json", "b.json", ""});
  CHECK(rows.at("max concurrency") == std::vector<std::string>{"max concurrency", "16", "16", ""});
  CHECK(rows.at("completed") == std::vector<std::string>{"completed", "10", "10", "1.00x"});
  // 110 tokens in 10/16 s and in 10/64 s.
  CHECK(rows.at("output throughput (tok/s)") ==
        std::vector<std::string>{"output throughput (tok/s)", "176.00", "704.00", "4.00x"});
  CHECK(rows.at("median TTFT (ms)") == std::vector<std::string>{"median TTFT (ms)", "550.00", "137.50", "0.25x"});
  CHECK(rows.at("request goodput (req/s)") == std::vector<std::string>{"request goodput (req/s)", "-", "-", "-"});
  for (const char* name : {"p99 TTFT (ms)", "mean TPOT (ms)", "median ITL (ms)", "p90 E2EL (ms)", "failed"}) {
    CHECK(rows.count(name) == 1);
  }

  const std::string text = FormatTable(table);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == table.rows.size() + 2);
  CHECK(lines[0].find("one-at-a-time") != std::string::npos);
  CHECK(lines[1].find_first_not_of('-') == std::string::npos);
  for (const auto& line : lines) CHECK(line.size() == lines[0].size());  // aligned columns

  const std::string markdown = FormatTable(table, /*markdown=*/true);
  CHECK(markdown.find("| metric") == 0);
  CHECK(markdown.find("---:") != std::string::npos);
  CHECK(markdown.find("| output throughput (tok/s)") != std::string::npos);

  // Three files: no ratio column.
  auto three = results;
  three.emplace_back("c.json", SyntheticResult("", 8, 2.0));
  const CompareTable wide = BuildCompareTable(three);
  CHECK(wide.headers == std::vector<std::string>{"metric", "one-at-a-time", "continuous", "c.json"});
}

TEST_CASE("the plot is a well-formed SVG with a line per series and percentile", "[unit]") {
  std::vector<std::pair<std::string, json>> results;
  for (int64_t concurrency : {4, 1, 16}) {  // out of order: series are sorted by concurrency
    results.emplace_back("cb.json", SyntheticResult("continuous <batching> & co", concurrency, 4.0));
    results.emplace_back("one.json", SyntheticResult("max_running=1", concurrency, 1.0));
  }
  const std::vector<PlotSeries> series = SeriesFromResults(results);
  REQUIRE(series.size() == 2);
  CHECK(series[0].name == "continuous <batching> & co");
  REQUIRE(series[0].points.size() == 3);
  CHECK(series[0].points[0].x == 1);
  CHECK(series[0].points[2].x == 16);
  CHECK(series[1].points[1].output_throughput == Approx(110.0 * 4 / 10));

  const std::string svg = RenderSvgPlot(series, "Sweep \"A\"");
  const std::vector<std::string> elements = ParseXmlElements(svg);
  REQUIRE(!elements.empty());
  CHECK(elements[0] == "svg");
  CHECK(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  // Four panels: throughput (one line per series), TTFT, TPOT, E2EL (p50 and p99 per series).
  CHECK(CountOf(elements, "g") == 5);  // legend + 4 panels
  CHECK(CountOf(elements, "polyline") == 2 + 3 * 2 * 2);
  CHECK(CountOf(elements, "circle") == (2 + 3 * 2 * 2) * 3);
  for (const char* id : {"id=\"throughput\"", "id=\"ttft\"", "id=\"tpot\"", "id=\"e2el\""}) {
    CHECK(svg.find(id) != std::string::npos);
  }
  CHECK(svg.find("continuous &lt;batching&gt; &amp; co") != std::string::npos);
  CHECK(svg.find("Sweep &quot;A&quot;") != std::string::npos);
  CHECK(svg.find("concurrency (log scale)") != std::string::npos);
  CHECK(svg.find("stroke-dasharray") != std::string::npos);
  // Each series line has a point per concurrency.
  size_t at = 0;
  int polylines = 0;
  while ((at = svg.find("<polyline", at)) != std::string::npos) {
    const size_t points = svg.find("points=\"", at) + 8;
    const std::string list = svg.substr(points, svg.find('"', points) - points);
    CHECK(std::vector<std::string>(absl::StrSplit(list, ' ')).size() == 3);
    ++polylines;
    ++at;
  }
  CHECK(polylines == 14);
  // The x tick labels are the concurrencies.
  for (const char* tick : {">1</text>", ">4</text>", ">16</text>"}) CHECK(svg.find(tick) != std::string::npos);
}

}  // namespace
}  // namespace llmc::bench
