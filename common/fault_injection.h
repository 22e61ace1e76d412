#ifndef LLMC_COMMON_FAULT_INJECTION_H_
#define LLMC_COMMON_FAULT_INJECTION_H_

#include "absl/strings/string_view.h"

namespace llmc {

// Named points where the fault tests make a process fail on purpose (docs/reliability.md). The
// LLMC_FAULT_INJECTION environment variable, read once, lists them separated by commas: `NAME` fires at
// every check, `NAME@K` from the K-th check on (1-based), `NAME@K-L` at checks K to L. Unset, a check is
// one atomic load and a look at an empty table.
//   model_step        the engine's forward action fails as a model error would (INTERNAL)
//   model_step_throw  the engine's forward action throws, as an asynchronous device error would
bool FaultInjected(absl::string_view point);

// Replaces the table with `spec` (same syntax; "" clears it), for tests inside one process. The old table
// is kept alive, so a check racing with the change reads one or the other.
void SetFaultInjectionForTesting(absl::string_view spec);

}  // namespace llmc

#endif  // LLMC_COMMON_FAULT_INJECTION_H_
