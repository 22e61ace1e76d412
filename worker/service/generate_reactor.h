#ifndef LLMC_WORKER_SERVICE_GENERATE_REACTOR_H_
#define LLMC_WORKER_SERVICE_GENERATE_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "llmc/v1/worker.pb.h"
#include "worker/engine/engine.h"
#include "worker/service/typed_output_state.h"

namespace llmc::worker {

// One Generate stream. The engine's delivery thread hands responses to a sink that only queues them here and,
// when no write is in flight, starts the next one; gRPC's OnWriteDone starts the one after. Exactly one
// write is in flight at a time; responses that arrive while the reader is behind are merged into the last
// waiting message (response_merge.h) up to kMaxMergedBytes, so a slow reader costs a few large messages,
// not one per step. A response whose prompt logprobs would pass kMaxGrpcMessageBytes goes out in parts of at
// most kPromptLogprobsPartBytes (SplitPromptLogprobs). What waits is bounded: past max_queued_bytes (beyond
// the stream's prompt logprobs, which come once and are bounded by the context) the reader is too slow, and
// the stream ends with FAILED_PRECONDITION and its generation is aborted; the engine serves the others on.
// The call finishes with the engine's status once nothing waits.
//
// Ownership: the reactor owns itself until gRPC calls OnDone, and the engine's sink holds another reference,
// so a sink that outlives the call (the engine drops a cancelled request only at its next step) still points
// at a live object; it finds the call finished and drops what it delivers. Nothing touches gRPC after Finish.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Bytes that may wait for a slow reader, beyond the stream's prompt logprobs, unless told otherwise.
  static constexpr size_t kDefaultMaxQueuedBytes = 64 << 20;
  // The largest part of a long prompt's logprobs, far below kMaxGrpcMessageBytes.
  static constexpr size_t kPromptLogprobsPartBytes = 4 << 20;

  // The returned reactor is owned by itself (and later the engine's sink); hand it to gRPC. `live_streams`
  // counts reactors from here until OnDone, `queued_bytes` the bytes waiting in all streams' queues (the
  // stream_queued_bytes gauge); both must outlive the call. `max_queued_bytes`: as kDefaultMaxQueuedBytes.
  static GenerateReactor* Create(engine::Engine& engine, std::atomic<int64_t>& live_streams,
                                 std::atomic<int64_t>& queued_bytes, size_t max_queued_bytes = kDefaultMaxQueuedBytes);

  // Finishes the call at once with `status` (a refusal before anything reached the engine).
  void Refuse(const absl::Status& status);
  // Submits to the engine; a refusal (RESOURCE_EXHAUSTED, UNAVAILABLE, ...) finishes the call at once.
  // `echo_prompt` puts the prompt's ids on the first response; `typed` (chat) reads each delta's text as
  // content, reasoning and tool calls before it is queued.
  void Submit(engine::GenerationRequest request, bool echo_prompt, std::shared_ptr<TypedOutputState> typed = nullptr);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Private to the sink.
  void Deliver(v1::GenerateResponse response);
  void Complete(absl::Status status);

 private:
  struct Queued {
    v1::GenerateResponse response;
    size_t bytes = 0;  // about: the sizes of what was merged into it
  };

  GenerateReactor(engine::Engine& engine, std::atomic<int64_t>& live_streams, std::atomic<int64_t>& queued_bytes,
                  size_t max_queued_bytes)
      : engine_(engine),
        live_streams_(live_streams),
        all_queued_bytes_(queued_bytes),
        max_queued_bytes_(max_queued_bytes) {}
  // Starts the next write, or finishes when the queue is empty and the engine is done. The one place that
  // calls StartWrite or Finish; never called with mu_ held.
  void Pump();
  void Enqueue(v1::GenerateResponse response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropQueue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  engine::Engine& engine_;
  std::atomic<int64_t>& live_streams_;
  std::atomic<int64_t>& all_queued_bytes_;
  const size_t max_queued_bytes_;
  std::shared_ptr<GenerateReactor> self_;  // released in OnDone
  absl::Mutex mu_;
  // What waits behind the write in flight: later steps are merged into the last message until it reaches
  // kMaxMergedBytes, so a slow reader costs a few large messages, not one per step.
  static constexpr size_t kMaxMergedBytes = 1 << 20;
  std::deque<Queued> pending_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;                    // of pending_
  size_t prompt_logprob_bytes_ ABSL_GUARDED_BY(mu_) = 0;            // of the stream's prompt logprobs, once delivered
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;                    // past kMaxQueuedBytes: the stream is ending
  std::optional<absl::Status> engine_status_ ABSL_GUARDED_BY(mu_);  // set by the engine's OnDone
  std::optional<uint64_t> engine_id_ ABSL_GUARDED_BY(mu_);          // set once Submit succeeded
  std::vector<int32_t> prompt_to_echo_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // The message gRPC is writing; only touched when no write is in flight.
  v1::GenerateResponse in_flight_;
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_GENERATE_REACTOR_H_
