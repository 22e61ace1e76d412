#include "common/clock.h"

#include "absl/time/clock.h"

namespace llmc {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const Clock& Clock::Real() {
  static const RealClock* const clock = new RealClock();
  return *clock;
}

absl::Time ManualClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void ManualClock::Advance(absl::Duration delta) {
  absl::MutexLock lock(&mu_);
  now_ += delta;
}

void ManualClock::Set(absl::Time time) {
  absl::MutexLock lock(&mu_);
  now_ = time;
}

}  // namespace llmc
