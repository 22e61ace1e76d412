// RecentRate: the prefill rate a worker reports for prefix_aware dispatch.
#include "common/recent_rate.h"

#include <limits>

#include "tests/support/catch.h"

namespace llmc {
namespace {

TEST_CASE("recent rate: weighs samples by their size and lets old ones fade", "[unit][common]") {
  RecentRate rate(0.5);
  CHECK(rate.rate() == 0);  // nothing measured yet
  rate.Add(100, 1.0);
  CHECK(rate.rate() == Approx(100));
  // A short sample counts for its time, not as one rate among others: (100 * 0.5 + 10) / (1.0 * 0.5 + 0.01),
  // where averaging the two rates (100 and 1,000) would give 700.
  rate.Add(10, 0.01);
  CHECK(rate.rate() == Approx(60.0 / 0.51));
  // Samples of no time, negative amounts, NaN or infinities change nothing.
  const double inf = std::numeric_limits<double>::infinity();
  rate.Add(5, 0);
  rate.Add(-5, 1);
  rate.Add(std::numeric_limits<double>::quiet_NaN(), 1);
  rate.Add(inf, inf);
  rate.Add(5, inf);
  rate.Add(inf, 1);
  CHECK(rate.rate() == Approx(60.0 / 0.51));
  // After many samples at one speed, the rate is that speed.
  for (int i = 0; i < 60; ++i) rate.Add(30, 0.1);
  CHECK(rate.rate() == Approx(300).epsilon(1e-6));
}

}  // namespace
}  // namespace llmc
