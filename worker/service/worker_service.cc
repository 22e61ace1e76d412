#include "worker/service/worker_service.h"

#include <chrono>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_server.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "worker/service/embed_reactor.h"
#include "worker/service/generate_reactor.h"
#include "worker/service/request_conversion.h"
#include "worker/service/typed_output_plan.h"
#include "worker/service/typed_output_state.h"

namespace llmc::worker {
namespace {

constexpr int kLargeRequestThreads = 2;
constexpr size_t kLargeRequestQueue = 32;

absl::Status NotServing(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_DRAINING:
      return absl::UnavailableError("this worker is draining and takes no new requests; try another worker");
    case v1::WORKER_STATE_UNHEALTHY:
      return absl::UnavailableError("this worker's model steps keep failing; try another worker");
    default:
      return absl::UnavailableError("this worker is still starting; try another worker");
  }
}

// Tool call ids are random per request (clients send them back with the results).
uint64_t NewToolCallIdSeed() {
  thread_local absl::BitGen bits;
  return absl::Uniform<uint64_t>(bits);
}

ConstraintCompilerOptions WithMarkerTokens(ConstraintCompilerOptions options, const ServedModel& model) {
  options.marker_tokens = MarkerSpecialTokens(model, model.tool_call_format, model.reasoning);
  return options;
}

}  // namespace

WorkerService::WorkerService(engine::Engine& engine, ServedModel model, std::string worker_id,
                             absl::Duration request_timeout, ConstraintCompilerOptions constraint_options,
                             internal_auth::InternalCallAuthenticator authenticator)
    : engine_(engine),
      model_(std::move(model)),
      worker_id_(std::move(worker_id)),
      request_timeout_(request_timeout),
      authenticator_(std::move(authenticator)),
      started_(absl::Now()),
      constraints_(*model_.tokenizer, engine.manifest().eos_token_ids,
                   WithMarkerTokens(std::move(constraint_options), model_)),
      large_requests_(kLargeRequestThreads, kLargeRequestQueue) {}

void WorkerService::Convert(size_t request_bytes, const std::string& request_id, std::function<void()> convert,
                            const std::function<void(const absl::Status&)>& refuse) {
  if (request_bytes <= kInlineConversionBytes) return convert();
  const bool queued = large_requests_.TrySubmit([convert = std::move(convert), request_id] {
    ScopedLogContext log_context("request_id", request_id);
    convert();
  });
  if (!queued) {
    refuse(absl::ResourceExhaustedError("this worker is busy tokenizing other large requests; try another worker"));
  }
}

absl::Time WorkerService::Deadline(const grpc::CallbackServerContext& context) const {
  absl::Time deadline = absl::InfiniteFuture();
  // gRPC reports "no deadline" as the largest time point.
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = absl::FromChrono(context.deadline());
  }
  if (request_timeout_ > absl::ZeroDuration()) deadline = std::min(deadline, absl::Now() + request_timeout_);
  return deadline;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerService::Generate(grpc::CallbackServerContext* context,
                                                                        const v1::GenerateRequest* request) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) {
    return RefuseStream<v1::GenerateResponse>(auth);
  }
  GenerateReactor* reactor =
      GenerateReactor::Create(engine_, live_streams_, stream_queued_bytes_, max_stream_queued_bytes_.load());
  const std::string request_id =
      request->request_id().empty() ? absl::StrCat("worker-", ++unnamed_requests_) : request->request_id();
  ScopedLogContext log_context("request_id", request_id);
  if (const v1::WorkerState state = state_.load(); state != v1::WORKER_STATE_READY) {
    reactor->Refuse(NotServing(state));
    return reactor;
  }
  // Tells the gateway that this worker took the stream: a gateway that hears nothing soon (a stopped
  // process) tries another worker. gRPC sends the metadata once this handler returns, so after the inline
  // conversion of a small request (up to kInlineConversionBytes) but before any queueing or model step.
  reactor->StartSendInitialMetadata();
  // Rendering and tokenizing run here for ordinary requests; a large one (MBs of prompt or conversation)
  // would hold this gRPC thread for milliseconds, so it goes to the bounded executor.
  auto convert = [this, reactor, request, request_id, deadline = Deadline(*context)] {
    std::optional<TypedOutputPlan> typed;
    absl::StatusOr<engine::GenerationRequest> converted = ToGenerationRequest(*request, model_, &typed);
    if (!converted.ok()) {
      LLMC_LOG(Debug) << "invalid request: " << converted.status();
      return reactor->Refuse(converted.status());
    }
    converted->request_id = request_id;
    converted->deadline = deadline;
    const bool echo_prompt = request->return_prompt_token_ids();
    std::shared_ptr<TypedOutputState> typed_state;
    const v1::OutputConstraint* constraint =
        request->sampling().has_constraint() ? &request->sampling().constraint() : nullptr;
    if (typed.has_value()) {
      typed_state = std::make_shared<TypedOutputState>(*typed, NewToolCallIdSeed());
      if (typed->constraint.has_value()) constraint = &*typed->constraint;
    }
    if (constraint == nullptr) return reactor->Submit(*std::move(converted), echo_prompt, std::move(typed_state));
    // The grammar compiles off this thread (or comes from the cache); the engine never waits for it.
    auto pending = std::make_shared<engine::GenerationRequest>(*std::move(converted));
    constraints_.Compile(*constraint, [reactor, pending, echo_prompt,
                                       typed_state](absl::StatusOr<engine::OutputConstraint> compiled) mutable {
      if (!compiled.ok()) {
        LLMC_LOG(Debug) << "constraint refused: " << compiled.status();
        return reactor->Refuse(compiled.status());
      }
      pending->constraint = *std::move(compiled);
      reactor->Submit(std::move(*pending), echo_prompt, std::move(typed_state));
    });
  };
  Convert(request->ByteSizeLong(), request_id, std::move(convert),
          [reactor](const absl::Status& status) { reactor->Refuse(status); });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::GetStatus(grpc::CallbackServerContext* context,
                                                   const v1::GetStatusRequest* request,
                                                   v1::GetStatusResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  const engine::EngineLoad load = engine_.Load();
  response->set_worker_id(worker_id_);
  response->set_state(state_.load());
  *response->add_models() = model_.info;
  *response->mutable_load() = ToWorkerLoad(load);
  response->set_version(WorkerVersion());
  response->set_uptime_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(absl::Now() - started_)));
  response->set_num_preemptions(static_cast<uint64_t>(load.num_preemptions));
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* WorkerService::Tokenize(grpc::CallbackServerContext* context,
                                                  const v1::TokenizeRequest* request, v1::TokenizeResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  // A large text (megabytes) would hold this gRPC thread while it is tokenized: it goes to the bounded
  // executor, as Generate's large requests do.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Convert(
      request->ByteSizeLong(), "",
      [this, reactor, request, response] {
        absl::StatusOr<v1::TokenizeResponse> result = worker::Tokenize(*request, model_);
        if (result.ok()) *response = *std::move(result);
        reactor->Finish(ToGrpcStatus(result.status()));
      },
      [reactor](const absl::Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Detokenize(grpc::CallbackServerContext* context,
                                                    const v1::DetokenizeRequest* request,
                                                    v1::DetokenizeResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Convert(
      request->ByteSizeLong(), "",
      [this, reactor, request, response] {
        absl::StatusOr<v1::DetokenizeResponse> result = worker::Detokenize(*request, model_);
        if (result.ok()) *response = *std::move(result);
        reactor->Finish(ToGrpcStatus(result.status()));
      },
      [reactor](const absl::Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Embed(grpc::CallbackServerContext* context, const v1::EmbedRequest* request,
                                               v1::EmbedResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  EmbedReactor* reactor = EmbedReactor::Create(engine_, response, live_embed_calls_);
  const std::string request_id =
      request->request_id().empty() ? absl::StrCat("worker-", ++unnamed_requests_) : request->request_id();
  ScopedLogContext log_context("request_id", request_id);
  if (const v1::WorkerState state = state_.load(); state != v1::WORKER_STATE_READY) {
    reactor->Refuse(NotServing(state));
    return reactor;
  }
  // As for Generate: tokenizing megabytes of input would hold this gRPC thread, so large requests go to the
  // bounded executor.
  auto convert = [this, reactor, request, deadline = Deadline(*context)] {
    absl::StatusOr<std::vector<engine::GenerationRequest>> converted = ToEmbeddingRequests(*request, model_);
    if (!converted.ok()) return reactor->Refuse(converted.status());
    for (engine::GenerationRequest& input : *converted) input.deadline = deadline;
    reactor->Start(*std::move(converted));
  };
  Convert(request->ByteSizeLong(), request_id, std::move(convert),
          [reactor](const absl::Status& status) { reactor->Refuse(status); });
  return reactor;
}

}  // namespace llmc::worker
