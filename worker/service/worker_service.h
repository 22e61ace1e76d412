#ifndef LLMC_WORKER_SERVICE_WORKER_SERVICE_H_
#define LLMC_WORKER_SERVICE_WORKER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/bounded_executor.h"
#include "common/internal_auth/internal_call_authenticator.h"
#include "llmc/v1/worker.grpc.pb.h"
#include "worker/engine/engine.h"
#include "worker/service/constraint_compiler.h"
#include "worker/service/generate_reactor.h"
#include "worker/service/served_model.h"

namespace llmc::worker {

// The Worker gRPC service (callback API). Generate is a GenerateReactor per stream; the unary RPCs answer
// on the calling gRPC thread. The engine must outlive the server the service is registered with.
class WorkerService final : public v1::Worker::CallbackService {
 public:
  // `request_timeout` bounds each request on top of the caller's deadline (zero: no bound). Every RPC is
  // refused UNAUTHENTICATED unless `authenticator` accepts it (the gateway's calls carry the cluster secret).
  WorkerService(engine::Engine& engine, ServedModel model, std::string worker_id,
                absl::Duration request_timeout = absl::ZeroDuration(),
                ConstraintCompilerOptions constraint_options = {},
                internal_auth::InternalCallAuthenticator authenticator = {});

  // Generate is served only when READY: STARTING, DRAINING and UNHEALTHY refuse it with UNAVAILABLE.
  void SetState(v1::WorkerState state) { state_.store(state); }
  v1::WorkerState state() const { return state_.load(); }
  const ServedModel& model() const { return model_; }
  // Structured-output constraints are compiled here before their request reaches the engine.
  ConstraintCompiler& constraints() { return constraints_; }
  // Generate and Embed calls not yet done (their last message or status may still be on its way).
  int64_t live_streams() const { return live_streams_.load() + live_embed_calls_.load(); }
  // Bytes of Generate answers waiting for their readers, over all streams.
  int64_t stream_queued_bytes() const { return stream_queued_bytes_.load(); }
  // What may wait for one stream's reader before the stream ends (GenerateReactor::kDefaultMaxQueuedBytes);
  // set before serving.
  void set_max_stream_queued_bytes(size_t bytes) { max_stream_queued_bytes_.store(bytes); }

  // Generate, Embed, Tokenize and Detokenize requests up to this size are rendered and tokenized on the gRPC
  // thread; larger ones on a bounded executor (RESOURCE_EXHAUSTED when it is full, so the gateway tries
  // another worker).
  static constexpr size_t kInlineConversionBytes = 64 * 1024;
  // The executor of large requests, for tests that hold it busy.
  BoundedExecutor& large_requests_for_testing() { return large_requests_; }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context, const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context, const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context, const v1::EmbedRequest* request,
                                  v1::EmbedResponse* response) override;

 private:
  absl::Time Deadline(const grpc::CallbackServerContext& context) const;
  // Runs `convert` (render and tokenize a request, then hand it on) here for a request of up to
  // kInlineConversionBytes, else on the bounded executor; `refuse` gets RESOURCE_EXHAUSTED when that is full.
  void Convert(size_t request_bytes, const std::string& request_id, std::function<void()> convert,
               const std::function<void(const absl::Status&)>& refuse);

  engine::Engine& engine_;
  const ServedModel model_;
  const std::string worker_id_;
  const absl::Duration request_timeout_;
  const internal_auth::InternalCallAuthenticator authenticator_;
  const absl::Time started_;
  std::atomic<v1::WorkerState> state_{v1::WORKER_STATE_STARTING};
  std::atomic<uint64_t> unnamed_requests_{0};
  std::atomic<int64_t> live_streams_{0};
  std::atomic<int64_t> stream_queued_bytes_{0};
  std::atomic<size_t> max_stream_queued_bytes_{GenerateReactor::kDefaultMaxQueuedBytes};
  std::atomic<int64_t> live_embed_calls_{0};
  ConstraintCompiler constraints_;
  BoundedExecutor large_requests_;  // last: destroyed (and drained) first, while the rest is alive
};

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_WORKER_SERVICE_H_
