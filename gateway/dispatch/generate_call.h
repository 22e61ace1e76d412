#ifndef LLMC_GATEWAY_DISPATCH_GENERATE_CALL_H_
#define LLMC_GATEWAY_DISPATCH_GENERATE_CALL_H_

#include <functional>
#include <memory>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "llmc/v1/worker.grpc.pb.h"

namespace llmc::gateway {

// Called once the consumer of a message wants the next one, from any thread. A consumer that drops it
// uncalled lets the read start anyway.
using ReadNext = std::function<void()>;

// One Worker.Generate server stream, read with a callback reactor. `on_response` runs for each message and
// then `on_done` once with the stream's status, all on gRPC threads and never two at a time. The next
// message is read only after `read_next` is called: a consumer that cannot keep up (a slow HTTP client)
// stops reading, and gRPC's flow control pushes back on the worker.
struct GenerateCallbacks {
  // When the worker has taken the stream (its initial metadata arrived), before any message. May be empty.
  std::function<void()> on_accepted;
  std::function<void(v1::GenerateResponse response, ReadNext read_next)> on_response;
  std::function<void(const grpc::Status& status)> on_done;
};

// A handle that may outlive the stream: Cancel after the end is a no-op.
class GenerateCallHandle {
 public:
  virtual ~GenerateCallHandle() = default;
  // Cancels the call (the worker aborts the request at its next step); on_done still runs, with CANCELLED.
  virtual void Cancel() = 0;
};

std::shared_ptr<GenerateCallHandle> StartGenerateCall(v1::Worker::Stub& stub, const v1::GenerateRequest& request,
                                                      absl::Time deadline, GenerateCallbacks callbacks);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_GENERATE_CALL_H_
