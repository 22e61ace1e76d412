#ifndef LLMC_COMMON_CLOCK_H_
#define LLMC_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace llmc {

// Time source, injected so that anything that ages out (heartbeats, deadlines) can be tested without sleeping.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide wall clock.
  static const Clock& Real();
};

// A clock that moves only when told; thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50)) : now_(start) {}

  absl::Time Now() const override;
  void Advance(absl::Duration delta);
  void Set(absl::Time time);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llmc

#endif  // LLMC_COMMON_CLOCK_H_
