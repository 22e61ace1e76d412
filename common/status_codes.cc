#include "common/status_codes.h"

#include <array>
#include <string>

namespace llmc {
namespace {

using absl::StatusCode;

// Ordered so that the first row for an HTTP status is the code that status stands for.
constexpr std::array<StatusCodeMapping, 17> kMappings = {{
    {StatusCode::kOk, grpc::StatusCode::OK, 200, ""},
    {StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT, 400, "invalid_request_error"},
    {StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION, 400, "invalid_request_error"},
    {StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE, 400, "invalid_request_error"},
    {StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED, 401, "authentication_error"},
    {StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED, 403, "permission_error"},
    {StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND, 404, "not_found_error"},
    {StatusCode::kAborted, grpc::StatusCode::ABORTED, 409, "conflict_error"},
    {StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS, 409, "conflict_error"},
    {StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED, 429, "rate_limit_error"},
    {StatusCode::kCancelled, grpc::StatusCode::CANCELLED, 499, "cancelled_error"},
    {StatusCode::kInternal, grpc::StatusCode::INTERNAL, 500, "server_error"},
    {StatusCode::kUnknown, grpc::StatusCode::UNKNOWN, 500, "server_error"},
    {StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS, 500, "server_error"},
    {StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED, 501, "not_implemented_error"},
    {StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE, 503, "service_unavailable_error"},
    {StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED, 504, "timeout_error"},
}};

const StatusCodeMapping& InternalRow() {
  for (const auto& row : kMappings) {
    if (row.absl_code == StatusCode::kInternal) return row;
  }
  return kMappings[0];  // unreachable: the table has an INTERNAL row
}

}  // namespace

const StatusCodeMapping& MappingFor(StatusCode code) {
  for (const auto& row : kMappings) {
    if (row.absl_code == code) return row;
  }
  return InternalRow();
}

int HttpStatusFor(StatusCode code) { return MappingFor(code).http_status; }

absl::string_view OpenAiErrorTypeFor(StatusCode code) { return MappingFor(code).openai_error_type; }

StatusCode StatusCodeFromHttp(int http_status) {
  for (const auto& row : kMappings) {
    if (row.http_status == http_status) return row.absl_code;
  }
  if (http_status >= 400 && http_status < 500) return StatusCode::kInvalidArgument;
  if (http_status >= 500) return StatusCode::kInternal;
  return StatusCode::kUnknown;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(MappingFor(status.code()).grpc_code, std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  for (const auto& row : kMappings) {
    if (row.grpc_code == status.error_code()) return absl::Status(row.absl_code, status.error_message());
  }
  return absl::Status(StatusCode::kUnknown, status.error_message());
}

}  // namespace llmc
