#include "tools/bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/result_json.h"

namespace llmc::bench {
namespace {

using nlohmann::json;

constexpr double kWidth = 1100;
constexpr double kHeight = 840;
constexpr double kPanelWidth = 440;
constexpr double kPanelHeight = 270;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string Num(double value) { return absl::StrFormat("%.1f", value); }

// Tick label: integers plainly, small values with the decimals they need.
std::string TickLabel(double value) {
  if (std::fabs(value - std::round(value)) < 1e-9) return absl::StrFormat("%.0f", value);
  if (std::fabs(value) >= 1) return absl::StrFormat("%.1f", value);
  return absl::StrFormat("%.2g", value);
}

// A step of 1, 2, 2.5 or 5 times a power of ten giving about `count` intervals up to `max`.
double NiceStep(double max, int count) {
  if (!(max > 0)) return 1;
  const double raw = max / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= factor * magnitude) return factor * magnitude;
  }
  return 10 * magnitude;
}

struct Line {
  std::function<double(const PlotPoint&)> value;
  bool dashed = false;
};

struct Panel {
  std::string id;
  std::string title;
  std::string y_label;
  std::vector<Line> lines;
};

class XAxis {
 public:
  explicit XAxis(const std::vector<PlotSeries>& series) {
    for (const auto& s : series) {
      for (const auto& p : s.points) values_.insert(p.x);
    }
    if (values_.empty()) values_.insert(1);
    min_ = *values_.begin();
    max_ = *values_.rbegin();
    log_ = min_ > 0 && max_ / min_ >= 4;
    if (!log_) {
      min_ = std::min(0.0, min_);
      if (max_ <= min_) max_ = min_ + 1;
    }
  }

  // Position in [0, 1].
  double Fraction(double x) const {
    if (log_) return max_ > min_ ? (std::log2(x) - std::log2(min_)) / (std::log2(max_) - std::log2(min_)) : 0.5;
    return (x - min_) / (max_ - min_);
  }

  std::vector<double> Ticks() const {
    if (values_.size() <= 12) return {values_.begin(), values_.end()};
    std::vector<double> ticks;
    if (log_) {
      for (double t = std::exp2(std::ceil(std::log2(min_))); t <= max_; t *= 2) ticks.push_back(t);
    } else {
      const double step = NiceStep(max_ - min_, 5);
      for (double t = min_; t <= max_ + 1e-9; t += step) ticks.push_back(t);
    }
    return ticks;
  }

  bool log() const { return log_; }

 private:
  std::set<double> values_;
  double min_ = 0, max_ = 1;
  bool log_ = false;
};

void DrawPanel(std::string& svg, const Panel& panel, const std::vector<PlotSeries>& series, const XAxis& x_axis,
               const std::string& x_label, double left, double top) {
  double y_max = 0;
  for (const auto& s : series) {
    for (const auto& p : s.points) {
      for (const auto& line : panel.lines) y_max = std::max(y_max, line.value(p));
    }
  }
  const double step = NiceStep(y_max, 5);
  const double y_top = y_max > 0 ? step * std::ceil(y_max / step - 1e-9) : step * 5;
  auto px = [&](double x) { return left + x_axis.Fraction(x) * kPanelWidth; };
  auto py = [&](double y) { return top + kPanelHeight - (y_top > 0 ? y / y_top : 0) * kPanelHeight; };

  absl::StrAppend(&svg, "<g class=\"panel\" id=\"", panel.id, "\">\n");
  absl::StrAppend(&svg, "<text class=\"panel-title\" x=\"", Num(left + kPanelWidth / 2), "\" y=\"", Num(top - 12),
                  "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">", Escape(panel.title), "</text>\n");
  // Grid and y ticks.
  for (double y = 0; y <= y_top + step * 1e-6; y += step) {
    absl::StrAppend(&svg, "<line x1=\"", Num(left), "\" y1=\"", Num(py(y)), "\" x2=\"", Num(left + kPanelWidth),
                    "\" y2=\"", Num(py(y)), "\" stroke=\"#e0e0e0\" stroke-width=\"1\"/>\n");
    absl::StrAppend(&svg, "<text x=\"", Num(left - 6), "\" y=\"", Num(py(y) + 4),
                    "\" text-anchor=\"end\" font-size=\"11\">", Escape(TickLabel(y)), "</text>\n");
  }
  // x ticks.
  for (double x : x_axis.Ticks()) {
    absl::StrAppend(&svg, "<line x1=\"", Num(px(x)), "\" y1=\"", Num(top + kPanelHeight), "\" x2=\"", Num(px(x)),
                    "\" y2=\"", Num(top + kPanelHeight + 5), "\" stroke=\"#000000\" stroke-width=\"1\"/>\n");
    absl::StrAppend(&svg, "<text x=\"", Num(px(x)), "\" y=\"", Num(top + kPanelHeight + 18),
                    "\" text-anchor=\"middle\" font-size=\"11\">", Escape(TickLabel(x)), "</text>\n");
  }
  // Axes.
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Num(left), "\" y1=\"", Num(top + kPanelHeight), "\" x2=\"",
                  Num(left + kPanelWidth), "\" y2=\"", Num(top + kPanelHeight),
                  "\" stroke=\"#000000\" stroke-width=\"1.5\"/>\n");
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Num(left), "\" y1=\"", Num(top), "\" x2=\"", Num(left),
                  "\" y2=\"", Num(top + kPanelHeight), "\" stroke=\"#000000\" stroke-width=\"1.5\"/>\n");
  absl::StrAppend(&svg, "<text class=\"x-label\" x=\"", Num(left + kPanelWidth / 2), "\" y=\"",
                  Num(top + kPanelHeight + 36), "\" text-anchor=\"middle\" font-size=\"12\">",
                  Escape(x_axis.log() ? x_label + " (log scale)" : x_label), "</text>\n");
  const double label_x = left - 52;
  const double label_y = top + kPanelHeight / 2;
  absl::StrAppend(&svg, "<text class=\"y-label\" x=\"", Num(label_x), "\" y=\"", Num(label_y),
                  "\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 ", Num(label_x), " ", Num(label_y),
                  ")\">", Escape(panel.y_label), "</text>\n");
  // Series.
  for (size_t s = 0; s < series.size(); ++s) {
    const char* color = kColors[s % (sizeof(kColors) / sizeof(kColors[0]))];
    for (const auto& line : panel.lines) {
      std::string points;
      for (const auto& p : series[s].points) {
        absl::StrAppend(&points, points.empty() ? "" : " ", Num(px(p.x)), ",", Num(py(line.value(p))));
      }
      absl::StrAppend(&svg, "<polyline class=\"series\" data-series=\"", Escape(series[s].name), "\" points=\"", points,
                      "\" fill=\"none\" stroke=\"", color, "\" stroke-width=\"2\"",
                      line.dashed ? " stroke-dasharray=\"6 4\"" : "", "/>\n");
      for (const auto& p : series[s].points) {
        absl::StrAppend(&svg, "<circle cx=\"", Num(px(p.x)), "\" cy=\"", Num(py(line.value(p))), "\" r=\"3\" fill=\"",
                        color, "\"/>\n");
      }
    }
  }
  absl::StrAppend(&svg, "</g>\n");
}

}  // namespace

std::vector<PlotSeries> SeriesFromResults(const std::vector<std::pair<std::string, json>>& results) {
  std::vector<PlotSeries> series;
  std::map<std::string, size_t> index;
  auto stat = [](const json& r, const char* metric, const char* key) {
    if (!r.contains(metric) || !r[metric].is_object()) return 0.0;
    return r[metric].value(key, 0.0);
  };
  for (const auto& [path, result] : results) {
    const std::string name = SeriesName(result, path);
    auto [it, inserted] = index.emplace(name, series.size());
    if (inserted) series.push_back(PlotSeries{name, {}});
    PlotPoint point;
    point.x = ConcurrencyOf(result);
    point.output_throughput = result.value("output_throughput", 0.0);
    point.ttft_p50 = stat(result, "ttft_ms", "median");
    point.ttft_p99 = stat(result, "ttft_ms", "p99");
    point.tpot_p50 = stat(result, "tpot_ms", "median");
    point.tpot_p99 = stat(result, "tpot_ms", "p99");
    point.e2el_p50 = stat(result, "e2el_ms", "median");
    point.e2el_p99 = stat(result, "e2el_ms", "p99");
    series[it->second].points.push_back(point);
  }
  for (auto& s : series) {
    std::stable_sort(s.points.begin(), s.points.end(),
                     [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
  }
  return series;
}

std::string RenderSvgPlot(const std::vector<PlotSeries>& series, const std::string& title, const std::string& x_label) {
  const XAxis x_axis(series);
  const std::vector<Panel> panels = {
      {"throughput", "Output token throughput", "tokens/s", {{[](const PlotPoint& p) { return p.output_throughput; }}}},
      {"ttft",
       "Time to first token",
       "ms",
       {{[](const PlotPoint& p) { return p.ttft_p50; }}, {[](const PlotPoint& p) { return p.ttft_p99; }, true}}},
      {"tpot",
       "Time per output token",
       "ms",
       {{[](const PlotPoint& p) { return p.tpot_p50; }}, {[](const PlotPoint& p) { return p.tpot_p99; }, true}}},
      {"e2el",
       "End-to-end latency",
       "ms",
       {{[](const PlotPoint& p) { return p.e2el_p50; }}, {[](const PlotPoint& p) { return p.e2el_p99; }, true}}},
  };
  std::string svg =
      absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
                   Num(kWidth), "\" height=\"", Num(kHeight), "\" viewBox=\"0 0 ", Num(kWidth), " ", Num(kHeight),
                   "\" font-family=\"sans-serif\">\n");
  absl::StrAppend(&svg, "<rect x=\"0\" y=\"0\" width=\"", Num(kWidth), "\" height=\"", Num(kHeight),
                  "\" fill=\"#ffffff\"/>\n");
  absl::StrAppend(&svg, "<text class=\"title\" x=\"", Num(kWidth / 2),
                  "\" y=\"30\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">", Escape(title),
                  "</text>\n");
  // Legend: one entry per series, then the line styles.
  absl::StrAppend(&svg, "<g class=\"legend\">\n");
  double x = 70;
  for (size_t s = 0; s < series.size(); ++s) {
    const char* color = kColors[s % (sizeof(kColors) / sizeof(kColors[0]))];
    absl::StrAppend(&svg, "<line x1=\"", Num(x), "\" y1=\"56\" x2=\"", Num(x + 28), "\" y2=\"56\" stroke=\"", color,
                    "\" stroke-width=\"3\"/>\n");
    absl::StrAppend(&svg, "<text class=\"legend-entry\" x=\"", Num(x + 34), "\" y=\"60\" font-size=\"13\">",
                    Escape(series[s].name), "</text>\n");
    x += 60 + 7.5 * static_cast<double>(series[s].name.size());
  }
  absl::StrAppend(&svg, "<line x1=\"", Num(x), "\" y1=\"56\" x2=\"", Num(x + 28),
                  "\" y2=\"56\" stroke=\"#000000\" stroke-width=\"2\"/>\n");
  absl::StrAppend(&svg, "<text x=\"", Num(x + 34), "\" y=\"60\" font-size=\"13\">p50</text>\n");
  x += 80;
  absl::StrAppend(&svg, "<line x1=\"", Num(x), "\" y1=\"56\" x2=\"", Num(x + 28),
                  "\" y2=\"56\" stroke=\"#000000\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n");
  absl::StrAppend(&svg, "<text x=\"", Num(x + 34), "\" y=\"60\" font-size=\"13\">p99</text>\n");
  absl::StrAppend(&svg, "</g>\n");
  for (size_t i = 0; i < panels.size(); ++i) {
    const double left = i % 2 == 0 ? 90 : 90 + kPanelWidth + 120;
    const double top = i / 2 == 0 ? 110 : 110 + kPanelHeight + 100;
    DrawPanel(svg, panels[i], series, x_axis, x_label, left, top);
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace llmc::bench
