#ifndef LLMC_WORKER_SERVICE_EMBED_REACTOR_H_
#define LLMC_WORKER_SERVICE_EMBED_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "llmc/v1/worker.pb.h"
#include "worker/engine/engine.h"

namespace llmc::worker {

// One Embed call: its inputs go to the engine as embedding requests, at most kMaxInFlightInputs at a time
// (so a request of 2,048 inputs neither fills the waiting queue nor starves other callers), each next one
// submitted as an earlier one completes. The call finishes with every embedding in input order, or with
// the first failure (naming the input), after which the inputs still in the engine are aborted.
//
// Ownership as GenerateReactor's: the reactor owns itself until gRPC calls OnDone, and each engine sink
// holds another reference; nothing touches gRPC after Finish.
class EmbedReactor final : public grpc::ServerUnaryReactor, public std::enable_shared_from_this<EmbedReactor> {
 public:
  static constexpr size_t kMaxInFlightInputs = 32;

  // `response` is the call's response message; `live_calls` counts reactors until OnDone and must outlive
  // the call.
  static EmbedReactor* Create(engine::Engine& engine, v1::EmbedResponse* response, std::atomic<int64_t>& live_calls);

  // Exactly one of Refuse and Start is called, once.
  void Refuse(const absl::Status& status);
  // Submits the inputs (ToEmbeddingRequests' output) with the first window, and the rest as they complete.
  void Start(std::vector<engine::GenerationRequest> requests);

  void OnCancel() override;
  void OnDone() override;

  // Private to the sinks.
  void InputDone(size_t index, absl::Status status, v1::Embedding embedding, uint32_t prompt_tokens);

 private:
  EmbedReactor(engine::Engine& engine, v1::EmbedResponse* response, std::atomic<int64_t>& live_calls)
      : engine_(engine), response_(response), live_calls_(live_calls) {}
  // Submits inputs while the window has room. Never called with mu_ held. Reads no self_ (gRPC may release
  // it on another thread once the call ends): the sinks get shared_from_this().
  void SubmitMore();
  // Ends the call with `status` unless it has ended; aborts what is still in the engine.
  void End(const absl::Status& status);
  // Marks the call started; false (and the call ended) when it was cancelled before.
  bool MarkStarted();

  engine::Engine& engine_;
  v1::EmbedResponse* const response_;
  std::atomic<int64_t>& live_calls_;
  std::shared_ptr<EmbedReactor> self_;  // released in OnDone
  absl::Mutex mu_;
  std::vector<engine::GenerationRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Embedding> embeddings_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> engine_ids_ ABSL_GUARDED_BY(mu_);  // 0: not (or no longer) in the engine
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  size_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  // Start or Refuse has run. Until then a cancellation only marks the call: the conversion queued on the
  // executor still holds the request and this reactor, so the call must not finish (and be freed) under it.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_before_start_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_EMBED_REACTOR_H_
