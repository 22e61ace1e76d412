#include "common/status_codes.h"

#include "common/status_macros.h"
#include "tests/support/catch.h"

namespace llmc {
namespace {

TEST_CASE("status_codes: every absl code survives a trip through gRPC", "[unit][status]") {
  for (int raw = 0; raw <= 16; ++raw) {
    const auto code = static_cast<absl::StatusCode>(raw);
    const absl::Status original(code, "message");
    const absl::Status back = FromGrpcStatus(ToGrpcStatus(original));
    INFO(raw);
    CHECK(back.code() == code);
    if (!original.ok()) CHECK(back.message() == "message");
  }
}

TEST_CASE("status_codes: HTTP statuses follow the architecture's table", "[unit][status]") {
  CHECK(HttpStatusFor(absl::StatusCode::kOk) == 200);
  CHECK(HttpStatusFor(absl::StatusCode::kInvalidArgument) == 400);
  CHECK(HttpStatusFor(absl::StatusCode::kUnauthenticated) == 401);
  CHECK(HttpStatusFor(absl::StatusCode::kNotFound) == 404);
  CHECK(HttpStatusFor(absl::StatusCode::kResourceExhausted) == 429);
  CHECK(HttpStatusFor(absl::StatusCode::kInternal) == 500);
  CHECK(HttpStatusFor(absl::StatusCode::kUnavailable) == 503);
  CHECK(HttpStatusFor(absl::StatusCode::kDeadlineExceeded) == 504);
  for (int http : {400, 401, 404, 429, 500, 503, 504}) {
    INFO(http);
    CHECK(HttpStatusFor(StatusCodeFromHttp(http)) == http);
  }
  CHECK(StatusCodeFromHttp(418) == absl::StatusCode::kInvalidArgument);
  CHECK(StatusCodeFromHttp(502) == absl::StatusCode::kInternal);
  CHECK(OpenAiErrorTypeFor(absl::StatusCode::kInvalidArgument) == "invalid_request_error");
  CHECK(OpenAiErrorTypeFor(absl::StatusCode::kUnauthenticated) == "authentication_error");
}

absl::StatusOr<int> Half(int value) {
  if (value % 2 != 0) return absl::InvalidArgumentError("odd");
  return value / 2;
}

absl::StatusOr<int> Quarter(int value) {
  ASSIGN_OR_RETURN(int half, Half(value));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int value) {
  RETURN_IF_ERROR(Half(value).status());
  return absl::OkStatus();
}

TEST_CASE("status_macros: errors propagate and values flow through", "[unit][status]") {
  CHECK(Quarter(8).value() == 2);
  CHECK(Quarter(6).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(CheckEven(4).ok());
  CHECK(CheckEven(3).message() == "odd");
  CHECK(Annotate(absl::NotFoundError("gone"), "model m").message() == "model m: gone");
  CHECK(Annotate(absl::OkStatus(), "ignored").ok());
}

}  // namespace
}  // namespace llmc
