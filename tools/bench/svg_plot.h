#ifndef LLMC_TOOLS_BENCH_SVG_PLOT_H_
#define LLMC_TOOLS_BENCH_SVG_PLOT_H_

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace llmc::bench {

// One measured point of a series: a result file at its concurrency.
struct PlotPoint {
  double x = 0;  // concurrency (max_concurrency, or num_prompts when unlimited)
  double output_throughput = 0;
  double ttft_p50 = 0, ttft_p99 = 0;
  double tpot_p50 = 0, tpot_p99 = 0;
  double e2el_p50 = 0, e2el_p99 = 0;
};

struct PlotSeries {
  std::string name;
  std::vector<PlotPoint> points;  // sorted by x
};

// Groups result files into series by label (else file name), each sorted by concurrency.
std::vector<PlotSeries> SeriesFromResults(const std::vector<std::pair<std::string, nlohmann::json>>& results);

// A self-contained SVG document with four panels against concurrency — output-token throughput, and TTFT,
// TPOT and end-to-end latency with p50 as solid and p99 as dashed lines — one colour per series, axes with
// ticks and labels, and a legend. The x axis is logarithmic (base 2) when concurrencies span 4× or more.
// `x_label` names the x axis.
std::string RenderSvgPlot(const std::vector<PlotSeries>& series, const std::string& title,
                          const std::string& x_label = "concurrency");

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_SVG_PLOT_H_
