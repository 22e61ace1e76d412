#include "gateway/completion_handler.h"

#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_response.h"

namespace llmc::gateway {
namespace {

constexpr char kJson[] = "application/json";

// One request in flight: turns the worker's messages into the answer. Dispatcher callbacks arrive on gRPC
// threads one at a time; the client-gone callback may come from an I/O thread at any moment.
class Generation final : public std::enable_shared_from_this<Generation> {
 public:
  Generation(const OpenAiRequest& request, std::shared_ptr<ResponseWriter> writer, GatewayMetrics& metrics,
             const CompletionHandler::Options& options)
      : writer_(std::move(writer)),
        metrics_(metrics),
        options_(options),
        stream_(request.stream),
        builder_(request, NewResponseId(request.kind), absl::ToUnixSeconds(absl::Now()), request.model,
                 options.system_fingerprint),
        start_(absl::Now()) {
    metrics_.GenerationStarted();
  }
  ~Generation() { metrics_.GenerationEnded(); }

  void Run(GenerationDispatcher& dispatcher, const v1::GenerateRequest& generate) {
    auto self = shared_from_this();
    writer_->OnClientGone([self] { self->CancelFromClient(); });
    auto handle = dispatcher.Dispatch(generate, start_ + options_.request_timeout,
                                      {[self](v1::GenerateResponse response, ReadNext read_next) {
                                         self->OnResponse(std::move(response), std::move(read_next));
                                       },
                                       [self](absl::Status status) { self->OnDone(std::move(status)); }});
    absl::MutexLock lock(&mu_);
    if (done_) return;  // finished already (a fast failure): keeping the handle would make a cycle
    handle_ = handle;
    if (client_gone_) handle->Cancel();
  }

 private:
  void CancelFromClient() {
    std::shared_ptr<DispatchHandle> handle;
    {
      absl::MutexLock lock(&mu_);
      client_gone_ = true;
      handle = handle_;
    }
    if (handle != nullptr) handle->Cancel();
  }

  // The worker's next message is read once this one's events have (mostly) left for the client, so a slow
  // reader holds at most a few KiB here and the rest waits in the worker, coalesced.
  void OnResponse(v1::GenerateResponse response, ReadNext read_next) {
    std::shared_ptr<DispatchHandle> to_cancel;
    bool wait_for_client = false;
    {
      absl::MutexLock lock(&mu_);
      if (!failed_.has_value()) {
        if (absl::Status status = Deliver(response); !status.ok()) {
          // A message the builder refuses (an aborted choice): the answer ends with the error, the worker
          // call is cancelled and its further messages ignored.
          failed_ = status;
          to_cancel = handle_;
        }
        wait_for_client = stream_ && !failed_.has_value();
      }
    }
    if (to_cancel != nullptr) to_cancel->Cancel();
    if (wait_for_client) {
      writer_->WhenDrained(std::move(read_next));
    } else {
      read_next();
    }
  }

  absl::Status Deliver(const v1::GenerateResponse& response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time now = absl::Now();
    if (last_message_ == absl::InfinitePast()) {
      metrics_.ObserveTimeToFirstToken(now - start_);
    } else {
      metrics_.ObserveInterToken(now - last_message_);
    }
    last_message_ = now;
    if (response.has_usage()) usage_ = response.usage();
    if (!stream_) return builder_.Accumulate(response);
    if (!started_) {
      started_ = true;
      writer_->StartEventStream();
      for (auto& event : builder_.Start()) writer_->WriteEvent(std::move(event));
    }
    absl::StatusOr<std::vector<std::string>> events = builder_.OnResponse(response);
    if (!events.ok()) return events.status();
    for (auto& event : *events) writer_->WriteEvent(std::move(event));
    return absl::OkStatus();
  }

  void OnDone(absl::Status status) {
    absl::MutexLock lock(&mu_);
    done_ = true;
    handle_.reset();  // the dispatch run's callbacks hold this object: drop the cycle once it is over
    if (failed_.has_value()) status = *failed_;
    metrics_.ObserveEndToEnd(absl::Now() - start_);
    if (client_gone_) return;  // nobody to answer
    if (status.code() == absl::StatusCode::kNotFound) status = WithErrorCode(status, "model_not_found");
    if (!status.ok()) {
      LLMC_LOG(Info).With("request_id", writer_->request_id()) << "generation failed: " << status.message();
      if (status.code() == absl::StatusCode::kResourceExhausted) metrics_.CountRejection("queue_full");
      if (status.code() == absl::StatusCode::kUnavailable) metrics_.CountRejection("unavailable");
      if (started_) {
        writer_->WriteEvent(StreamErrorEvent(status));
        writer_->WriteEvent("[DONE]");
        writer_->EndEventStream();
      } else {
        SendError(*writer_, status, options_.retry_after_seconds);
      }
      return;
    }
    if (!stream_) {
      writer_->Send(200, kJson, builder_.FinalJson(usage_));
      return;
    }
    if (!started_) {  // cannot happen with a well-behaved worker (the last message carries usage)
      writer_->StartEventStream();
      for (auto& event : builder_.Start()) writer_->WriteEvent(std::move(event));
    }
    for (auto& event : builder_.Finish(usage_)) writer_->WriteEvent(std::move(event));
    writer_->WriteEvent("[DONE]");
    writer_->EndEventStream();
  }

  const std::shared_ptr<ResponseWriter> writer_;
  GatewayMetrics& metrics_;
  const CompletionHandler::Options& options_;
  const bool stream_;
  absl::Mutex mu_;
  OpenAiResponseBuilder builder_ ABSL_GUARDED_BY(mu_);
  v1::Usage usage_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<DispatchHandle> handle_ ABSL_GUARDED_BY(mu_);
  const absl::Time start_;
  absl::Time last_message_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace

void SendError(ResponseWriter& writer, const absl::Status& status, uint32_t retry_after_seconds) {
  HttpHeaders headers;
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    headers.emplace_back("Retry-After", absl::StrCat(retry_after_seconds));
  }
  writer.Send(HttpStatusOf(status), kJson, ErrorEnvelope(status), std::move(headers));
}

void WithBody(BoundedExecutor& large_bodies, const HttpRequest& request, std::shared_ptr<ResponseWriter> writer,
              uint32_t retry_after_seconds,
              std::function<void(std::string_view body, std::shared_ptr<ResponseWriter> writer)> parse) {
  if (request.body().size() <= CompletionHandler::kInlineParseBytes) return parse(request.body(), std::move(writer));
  auto body = std::make_shared<std::string>(request.body());
  const bool queued = large_bodies.TrySubmit([body, writer, parse] { parse(*body, writer); });
  if (!queued) {
    SendError(*writer, absl::ResourceExhaustedError("the gateway is busy reading other large requests; retry shortly"),
              retry_after_seconds);
  }
}

void CompletionHandler::Handle(OpenAiKind kind, const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  WithBody(large_bodies_, request, std::move(writer), options_.retry_after_seconds,
           [this, kind](std::string_view body, std::shared_ptr<ResponseWriter> writer) {
             ParseAndDispatch(kind, body, std::move(writer));
           });
}

void CompletionHandler::ParseAndDispatch(OpenAiKind kind, std::string_view body,
                                         std::shared_ptr<ResponseWriter> writer) {
  absl::StatusOr<OpenAiRequest> parsed =
      kind == OpenAiKind::kChat ? ParseChatCompletionRequest(body) : ParseCompletionRequest(body);
  if (!parsed.ok()) return SendError(*writer, parsed.status(), options_.retry_after_seconds);
  parsed->generate.set_request_id(writer->request_id());
  auto generation = std::make_shared<Generation>(*parsed, writer, metrics_, options_);
  generation->Run(dispatcher_, parsed->generate);
}

}  // namespace llmc::gateway
