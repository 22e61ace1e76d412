#ifndef LLMC_COMMON_STATUS_CODES_H_
#define LLMC_COMMON_STATUS_CODES_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace llmc {

// One row of the single table that maps status codes between the three protocols llmc speaks.
struct StatusCodeMapping {
  absl::StatusCode absl_code;
  grpc::StatusCode grpc_code;
  int http_status;
  // The OpenAI error `type` for this code.
  absl::string_view openai_error_type;
};

// The row for `code`; unknown codes fall back to the INTERNAL row.
const StatusCodeMapping& MappingFor(absl::StatusCode code);

int HttpStatusFor(absl::StatusCode code);
absl::string_view OpenAiErrorTypeFor(absl::StatusCode code);
// The absl code an HTTP status stands for (the first table row with that status); other 4xx map to
// INVALID_ARGUMENT and other 5xx to INTERNAL.
absl::StatusCode StatusCodeFromHttp(int http_status);

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace llmc

#endif  // LLMC_COMMON_STATUS_CODES_H_
