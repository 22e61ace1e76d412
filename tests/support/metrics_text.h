#ifndef LLMC_TESTS_SUPPORT_METRICS_TEXT_H_
#define LLMC_TESTS_SUPPORT_METRICS_TEXT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llmc::testing {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// The sum of the samples of `name` in Prometheus text whose labels include every pair of `labels`;
// nullopt when no such sample is there at all.
std::optional<double> MetricSum(const std::string& text, const std::string& name, const MetricLabels& labels = {});

// GET /metrics from 127.0.0.1:`port` and MetricSum over it; nullopt when the scrape failed or the sample
// is missing.
std::optional<double> ScrapeMetric(int port, const std::string& name, const MetricLabels& labels = {});

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_METRICS_TEXT_H_
