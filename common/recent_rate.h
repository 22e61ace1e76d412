#ifndef LLMC_COMMON_RECENT_RATE_H_
#define LLMC_COMMON_RECENT_RATE_H_

#include <algorithm>
#include <cmath>

namespace llmc {

// A rate over recent work: amounts and the seconds they took, each summed with older samples fading by
// `decay` per sample, so a large sample counts for more than a small one. A worker measures how fast it
// computes prompt tokens with it (WorkerLoad.prefill_tokens_per_second), and so does llmc-sim's.
class RecentRate {
 public:
  // `decay` in [0, 1): 0 keeps only the last sample.
  explicit RecentRate(double decay = 0.9) : decay_(std::clamp(decay, 0.0, 0.999)) {}

  void Add(double amount, double seconds) {
    if (!std::isfinite(amount) || !std::isfinite(seconds) || seconds <= 0 || amount < 0) return;
    amount_ = amount_ * decay_ + amount;
    seconds_ = seconds_ * decay_ + seconds;
  }
  // Per second; 0 before the first sample.
  double rate() const { return seconds_ > 0 ? amount_ / seconds_ : 0; }

 private:
  const double decay_;
  double amount_ = 0;
  double seconds_ = 0;
};

}  // namespace llmc

#endif  // LLMC_COMMON_RECENT_RATE_H_
