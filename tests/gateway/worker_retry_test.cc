#include "gateway/dispatch/worker_retry.h"

#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

TEST_CASE("worker retry: refusals before output move on, up to max_attempts workers", "[unit][gateway]") {
  WorkerRetry retry(3);
  CHECK(retry.last_refusal().ok());
  CHECK(retry.RetryAfter(absl::ResourceExhaustedError("queue full"), "w1", /*may_retry=*/true));
  CHECK(retry.RetryAfter(absl::UnavailableError("draining"), "w2", /*may_retry=*/true));
  // The third worker is the last one asked: its refusal ends the request.
  CHECK_FALSE(retry.RetryAfter(absl::InternalError("step failed"), "w3", /*may_retry=*/true));
  CHECK(retry.refused() == std::vector<std::string>{"w1", "w2"});
  CHECK(retry.last_refusal().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("worker retry: other errors, output already sent, or a cancellation end the request", "[unit][gateway]") {
  for (const absl::Status& final_status :
       {absl::InvalidArgumentError("bad"), absl::NotFoundError("no model"), absl::CancelledError("gone"),
        absl::DeadlineExceededError("late"), absl::OkStatus()}) {
    WorkerRetry retry(3);
    CHECK_FALSE(retry.RetryAfter(final_status, "w1", /*may_retry=*/true));
    CHECK(retry.refused().empty());
  }
  WorkerRetry streaming(3);
  CHECK_FALSE(streaming.RetryAfter(absl::UnavailableError("worker gone mid-stream"), "w1", /*may_retry=*/false));
  CHECK(streaming.last_refusal().ok());
  WorkerRetry single(1);
  CHECK_FALSE(single.RetryAfter(absl::UnavailableError("draining"), "w1", /*may_retry=*/true));
}

}  // namespace
}  // namespace llmc::gateway
