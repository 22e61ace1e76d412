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
// not one per step. The call finishes with the engine's status once nothing waits.
//
// Ownership: the reactor owns itself until gRPC calls OnDone, and the engine's sink holds another reference,
// so a sink that outlives the call (the engine drops a cancelled request only at its next step) still points
// at a live object; it finds the call finished and drops what it delivers. Nothing touches gRPC after Finish.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // The returned reactor is owned by itself (and later the engine's sink); hand it to gRPC. `live_streams`
  // counts reactors from here until OnDone, and must outlive the call.
  static GenerateReactor* Create(engine::Engine& engine, std::atomic<int64_t>& live_streams);

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
  GenerateReactor(engine::Engine& engine, std::atomic<int64_t>& live_streams)
      : engine_(engine), live_streams_(live_streams) {}
  // Starts the next write, or finishes when the queue is empty and the engine is done. The one place that
  // calls StartWrite or Finish; never called with mu_ held.
  void Pump();

  engine::Engine& engine_;
  std::atomic<int64_t>& live_streams_;
  std::shared_ptr<GenerateReactor> self_;  // released in OnDone
  absl::Mutex mu_;
  // What waits behind the write in flight: later steps are merged into the last message until it reaches
  // kMaxMergedBytes, so a slow reader costs a few large messages, not one per step.
  static constexpr size_t kMaxMergedBytes = 1 << 20;
  std::deque<v1::GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;                   // of pending_.back(), about
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
