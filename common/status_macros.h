#ifndef LLMC_COMMON_STATUS_MACROS_H_
#define LLMC_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// Abseil's open-source release has no status macros; these are the usual shim.

#define LLMC_STATUS_CONCAT_INNER(a, b) a##b
#define LLMC_STATUS_CONCAT(a, b) LLMC_STATUS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                                       \
  do {                                                              \
    if (::absl::Status llmc_status_ = (expr); !llmc_status_.ok()) { \
      return llmc_status_;                                          \
    }                                                               \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, rexpr) \
  LLMC_ASSIGN_OR_RETURN_IMPL(LLMC_STATUS_CONCAT(llmc_statusor_, __LINE__), lhs, rexpr)

#define LLMC_ASSIGN_OR_RETURN_IMPL(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                               \
  if (!statusor.ok()) {                                  \
    return std::move(statusor).status();                 \
  }                                                      \
  lhs = std::move(statusor).value()

namespace llmc {

// Returns `status` with "context: " put before its message; OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace llmc

#endif  // LLMC_COMMON_STATUS_MACROS_H_
