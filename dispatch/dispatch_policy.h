#ifndef LLMC_DISPATCH_DISPATCH_POLICY_H_
#define LLMC_DISPATCH_DISPATCH_POLICY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dispatch/registered_worker.h"
#include "llmc/v1/controller.pb.h"

namespace llmc::dispatch {

// What a pick knows of the request it places.
struct PickRequest {
  absl::Span<const uint64_t> prefix_hashes;  // PickWorkerRequest.prefix_hashes
  absl::Time now = absl::InfinitePast();     // when the pick is made, on the clock of the workers' last_heartbeat
};

// Chooses which of several dispatchable workers gets a request.
// Not thread-safe: the registry calls it under its own lock.
class DispatchPolicy {
 public:
  virtual ~DispatchPolicy() = default;
  virtual absl::string_view name() const = 0;
  // Returns an index into `candidates`, which is never empty.
  virtual size_t Choose(absl::Span<const RegisteredWorker* const> candidates, const PickRequest& request) = 0;
  // A pick made elsewhere (another gateway) went to `worker`: learn from it as from one's own.
  virtual void Record(const RegisteredWorker& worker, const PickRequest& request) {}
  // The worker left, or registered again (so its caches are empty).
  virtual void Forget(absl::string_view worker_id) {}
};

// The prefix_aware policy's score of a worker, in estimated prompt tokens (prefix_aware_policy.h):
// prefix × the tokens it likely holds cached − load × the prefill tokens queued before the request's
// − kv × its KV cache use × queue_tokens.
struct PrefixAwareWeights {
  double prefix = 1.0;
  double load = 1.0;  // llmc-sim (docs/dispatch.md): p99 TTFT 0.09x shortest_queue's at 80 % load; 2: 0.12x, 4: 0.5x
  double kv = 0.5;
  size_t index_capacity = 1 << 20;  // prefix chunk hashes remembered
  double tokens_per_hash = 32;      // prompt tokens one prefix hash stands for (128 bytes of text)
  double queue_tokens = 2048;       // what a relative load of 1 (a full batch queued) counts as
};

// "lottery", "shortest_queue", "power_of_two" or "prefix_aware"; seed 0 seeds from the OS.
absl::StatusOr<std::unique_ptr<DispatchPolicy>> MakeDispatchPolicy(absl::string_view name, uint64_t seed,
                                                                   const PrefixAwareWeights& weights = {});

// The policy the controller announces in its routing feed; weights not set take the defaults.
absl::StatusOr<std::unique_ptr<DispatchPolicy>> MakeDispatchPolicy(const v1::DispatchSettings& settings, uint64_t seed);

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_DISPATCH_POLICY_H_
