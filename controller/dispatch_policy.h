#ifndef LLMC_CONTROLLER_DISPATCH_POLICY_H_
#define LLMC_CONTROLLER_DISPATCH_POLICY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "controller/registered_worker.h"

namespace llmc::controller {

// Chooses which of several dispatchable workers gets a request.
// Not thread-safe: the registry calls it under its own lock.
class DispatchPolicy {
 public:
  virtual ~DispatchPolicy() = default;
  virtual absl::string_view name() const = 0;
  // Returns an index into `candidates`, which is never empty.
  virtual size_t Choose(absl::Span<const RegisteredWorker* const> candidates) = 0;
};

// "lottery" or "shortest_queue"; seed 0 seeds from the OS.
absl::StatusOr<std::unique_ptr<DispatchPolicy>> MakeDispatchPolicy(absl::string_view name, uint64_t seed);

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_DISPATCH_POLICY_H_
