#include "gateway/completion_handler.h"

#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "gateway/openai/answer_shaper.h"
#include "gateway/openai/answer_size.h"
#include "gateway/openai/cache_salt.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_response.h"
#include "gateway/openai/responses_output.h"
#include "gateway/openai/responses_request.h"

namespace llmc::gateway {
namespace {

// A worker's INVALID_ARGUMENT names the field it refuses first ("response_format: ...", "guided_regex: ...",
// "sampling.logit_bias names token ..."): that field becomes the envelope's `param`.
absl::Status WithWorkerParameter(absl::Status status) {
  if (status.code() != absl::StatusCode::kInvalidArgument || !ParameterOf(status).empty()) return status;
  const absl::string_view message = status.message();
  absl::string_view param;
  absl::string_view rest = message;
  if (absl::ConsumePrefix(&rest, "sampling.")) {
    param = rest.substr(0, rest.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"));
  } else if (const size_t colon = message.find(": "); colon != absl::string_view::npos && colon < 64) {
    const absl::string_view field = message.substr(0, colon);
    if (absl::StartsWith(field, "response_format") || absl::StartsWith(field, "structured_outputs") ||
        absl::StartsWith(field, "guided_") || absl::StartsWith(field, "tools[")) {
      param = field;
    }
  }
  if (param.empty()) return status;
  return InvalidParameter(std::string_view(param.data(), param.size()),
                          std::string_view(message.data(), message.size()));
}

// "tools[k]..." in a worker's error, k counting the function tools forwarded, as the client's tools[positions[k]].
absl::Status NameClientTool(absl::Status status, const std::vector<uint32_t>& positions) {
  const std::string param = ParameterOf(status);
  absl::string_view rest = param;
  size_t index = 0;
  if (!absl::ConsumePrefix(&rest, "tools[")) return status;
  const size_t close = rest.find(']');
  if (close == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, close), &index) ||
      index >= positions.size()) {
    return status;
  }
  const std::string old_name = absl::StrCat("tools[", index, "]");
  const std::string new_name = absl::StrCat("tools[", positions[index], "]");
  std::string message(status.message());
  if (absl::StartsWith(message, old_name)) message.replace(0, old_name.size(), new_name);
  return InvalidParameter(absl::StrCat(new_name, rest.substr(close + 1)), message);
}

constexpr char kJson[] = "application/json";

std::vector<SseEvent> DataEvents(std::vector<std::string> data) {
  return std::vector<SseEvent>(std::make_move_iterator(data.begin()), std::make_move_iterator(data.end()));
}

// Chat Completions and Completions: OpenAiResponseBuilder's chunks as data-only events, a stream ending with
// `data: [DONE]` (after the error envelope when it failed).
class ChatCompletionShaper final : public AnswerShaper {
 public:
  ChatCompletionShaper(const OpenAiRequest& request, const std::string& system_fingerprint)
      : builder_(request, NewResponseId(request.kind), absl::ToUnixSeconds(absl::Now()), request.model,
                 system_fingerprint),
        tool_positions_(request.tool_positions) {}

  std::vector<SseEvent> Start() override { return DataEvents(builder_.Start()); }
  absl::StatusOr<std::vector<SseEvent>> OnResponse(const v1::GenerateResponse& response, size_t prompt) override {
    absl::StatusOr<std::vector<std::string>> chunks = builder_.OnResponse(response, prompt);
    if (!chunks.ok()) return chunks.status();
    return DataEvents(*std::move(chunks));
  }
  std::vector<SseEvent> Finish(const v1::Usage& usage) override {
    std::vector<SseEvent> events = DataEvents(builder_.Finish(usage));
    events.emplace_back("[DONE]");
    return events;
  }
  std::vector<SseEvent> Fail(const absl::Status& status) override { return {StreamErrorEvent(status), "[DONE]"}; }
  absl::Status Accumulate(const v1::GenerateResponse& response, size_t prompt) override {
    return builder_.Accumulate(response, prompt);
  }
  std::string FinalJson(const v1::Usage& usage) override { return builder_.FinalJson(usage); }
  size_t AnswerBytes() const override { return builder_.AnswerBytes(); }
  // The worker counts only the function tools it was sent; the client counts all it sent.
  absl::Status MapError(absl::Status status) const override {
    return NameClientTool(std::move(status), tool_positions_);
  }

 private:
  OpenAiResponseBuilder builder_;
  const std::vector<uint32_t> tool_positions_;
};

// One request in flight: turns the workers' messages into the answer, in the shape `shaper` gives it. A completions
// request with a list of prompts runs one generation per prompt (on whichever workers the router picks) and merges them
// into one answer, prompt i's choice j numbered i * n + j. Dispatcher callbacks arrive on gRPC threads, one at a time
// per generation; the client-gone callback may come from an I/O thread at any moment.
class Generation final : public std::enable_shared_from_this<Generation> {
 public:
  Generation(const OpenAiRequest& request, std::unique_ptr<AnswerShaper> shaper, std::shared_ptr<ResponseWriter> writer,
             GatewayMetrics& metrics, const CompletionHandler::Options& options)
      : writer_(std::move(writer)),
        metrics_(metrics),
        options_(options),
        stream_(request.stream),
        choices_per_prompt_(request.num_choices()),
        shaper_(std::move(shaper)),
        usage_per_prompt_(request.num_prompts()),
        running_(request.num_prompts()),
        start_(absl::Now()) {
    metrics_.GenerationStarted();
  }
  ~Generation() { metrics_.GenerationEnded(); }

  void Run(GenerationDispatcher& dispatcher, const std::vector<v1::GenerateRequest>& generates) {
    auto self = shared_from_this();
    writer_->OnClientGone([self] { self->CancelAll(/*client_gone=*/true); });
    std::vector<std::shared_ptr<DispatchHandle>> handles;
    for (size_t prompt = 0; prompt < generates.size(); ++prompt) {
      handles.push_back(
          dispatcher.Dispatch(generates[prompt], start_ + options_.request_timeout,
                              {[self, prompt](v1::GenerateResponse response, ReadNext read_next) {
                                 self->OnResponse(prompt, std::move(response), std::move(read_next));
                               },
                               [self, prompt](absl::Status status) { self->OnDone(prompt, std::move(status)); }}));
    }
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      if (running_ == 0) return;  // finished already (fast failures): keeping the handles would make a cycle
      handles_ = std::move(handles);
      cancel = client_gone_ || failed_.has_value();
    }
    if (cancel) CancelAll(/*client_gone=*/false);
  }

 private:
  void CancelAll(bool client_gone) {
    std::vector<std::shared_ptr<DispatchHandle>> handles;
    {
      absl::MutexLock lock(&mu_);
      if (client_gone) client_gone_ = true;
      handles = handles_;
    }
    for (const auto& handle : handles) handle->Cancel();
  }

  // The worker's next message is read once this one's events have (mostly) left for the client, so a slow
  // reader holds at most a few KiB here per generation and the rest waits in the workers, coalesced.
  void OnResponse(size_t prompt, v1::GenerateResponse response, ReadNext read_next) {
    bool cancel = false;
    bool wait_for_client = false;
    bool watch_drain = false;
    {
      absl::MutexLock lock(&mu_);
      if (!failed_.has_value()) {
        if (absl::Status status = Deliver(prompt, response); !status.ok()) {
          // A message the builder refuses (an aborted choice): the answer ends with the error, the worker
          // calls are cancelled and their further messages ignored.
          failed_ = status;
          cancel = true;
        }
        wait_for_client = stream_ && !failed_.has_value();
      }
      if (wait_for_client) {
        waiting_reads_.push_back(std::move(read_next));
        watch_drain = !drain_watched_;
        drain_watched_ = true;
      }
    }
    if (cancel) CancelAll(/*client_gone=*/false);
    if (!wait_for_client) return read_next();
    // One watch for all the generations: the writer keeps one drain callback at a time.
    if (watch_drain) writer_->WhenDrained([self = shared_from_this()] { self->ReadOnceDrained(); });
  }

  void ReadOnceDrained() {
    std::vector<ReadNext> reads;
    {
      absl::MutexLock lock(&mu_);
      reads.swap(waiting_reads_);
      drain_watched_ = false;
    }
    for (ReadNext& read : reads) read();
  }

  absl::Status Deliver(size_t prompt, v1::GenerateResponse& response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time now = absl::Now();
    if (last_message_ == absl::InfinitePast()) {
      metrics_.ObserveTimeToFirstToken(now - start_);
    } else {
      metrics_.ObserveInterToken(now - last_message_);
    }
    last_message_ = now;
    if (response.has_usage()) usage_per_prompt_[prompt] = response.usage();
    for (v1::TokenDelta& delta : *response.mutable_deltas()) {
      if (delta.choice_index() >= choices_per_prompt_) {
        return absl::InternalError(absl::StrCat("the worker sent choice ", delta.choice_index(),
                                                " but the request has ", choices_per_prompt_));
      }
      delta.set_choice_index(static_cast<uint32_t>(prompt * choices_per_prompt_ + delta.choice_index()));
    }
    if (!stream_) {
      RETURN_IF_ERROR(shaper_->Accumulate(response, prompt));
      if (const size_t bytes = shaper_->AnswerBytes(); bytes > options_.max_response_bytes) {
        return AnswerTooLarge(bytes, options_.max_response_bytes);
      }
      return absl::OkStatus();
    }
    // One hand-over per message, so the first token's head and chunks leave in one write.
    std::vector<SseEvent> events;
    const bool start = !started_;
    if (start) {
      started_ = true;
      events = shaper_->Start();
    }
    absl::StatusOr<std::vector<SseEvent>> more = shaper_->OnResponse(response, prompt);
    if (!more.ok()) {
      if (start) writer_->WriteEvents(std::move(events), /*start_stream=*/true);
      return more.status();
    }
    for (SseEvent& event : *more) events.push_back(std::move(event));
    if (start || !events.empty()) writer_->WriteEvents(std::move(events), start);
    return absl::OkStatus();
  }

  void OnDone(size_t prompt, absl::Status status) {
    bool cancel_others = false;
    {
      absl::MutexLock lock(&mu_);
      // The first failure ends the answer; the other generations are cancelled.
      if (!status.ok() && !failed_.has_value()) {
        failed_ = status;
        cancel_others = true;
      }
      if (--running_ == 0) return Answer();
    }
    if (cancel_others) CancelAll(/*client_gone=*/false);
  }

  void Answer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    handles_.clear();  // the dispatch runs' callbacks hold this object: drop the cycle once it is over
    absl::Status status = failed_.value_or(absl::OkStatus());
    metrics_.ObserveEndToEnd(absl::Now() - start_);
    if (client_gone_) return;  // nobody to answer
    if (status.code() == absl::StatusCode::kNotFound) status = WithErrorCode(status, "model_not_found");
    status = shaper_->MapError(WithWorkerParameter(std::move(status)));
    if (!status.ok()) {
      LLMC_LOG(Info).With("request_id", writer_->request_id()) << "generation failed: " << status.message();
      if (status.code() == absl::StatusCode::kResourceExhausted) metrics_.CountRejection("queue_full");
      if (status.code() == absl::StatusCode::kUnavailable) metrics_.CountRejection("unavailable");
      if (started_) {
        writer_->WriteEvents(shaper_->Fail(status));
        writer_->EndEventStream();
      } else {
        SendError(*writer_, status, options_.retry_after_seconds);
      }
      return;
    }
    v1::Usage usage;
    for (const v1::Usage& part : usage_per_prompt_) {
      usage.set_prompt_tokens(usage.prompt_tokens() + part.prompt_tokens());
      usage.set_completion_tokens(usage.completion_tokens() + part.completion_tokens());
      usage.set_total_tokens(usage.total_tokens() + part.total_tokens());
      usage.set_cached_prompt_tokens(usage.cached_prompt_tokens() + part.cached_prompt_tokens());
    }
    if (!stream_) {
      writer_->Send(200, kJson, shaper_->FinalJson(usage));
      return;
    }
    std::vector<SseEvent> events;
    if (!started_) events = shaper_->Start();  // only with a worker that sent no message at all
    for (SseEvent& event : shaper_->Finish(usage)) events.push_back(std::move(event));
    writer_->WriteEvents(std::move(events), /*start_stream=*/!started_);
    writer_->EndEventStream();
  }

  const std::shared_ptr<ResponseWriter> writer_;
  GatewayMetrics& metrics_;
  const CompletionHandler::Options& options_;
  const bool stream_;
  const uint32_t choices_per_prompt_;
  absl::Mutex mu_;
  const std::unique_ptr<AnswerShaper> shaper_ ABSL_PT_GUARDED_BY(mu_);
  std::vector<v1::Usage> usage_per_prompt_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_);  // generations whose on_done has not come yet
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<DispatchHandle>> handles_ ABSL_GUARDED_BY(mu_);
  std::vector<ReadNext> waiting_reads_ ABSL_GUARDED_BY(mu_);
  bool drain_watched_ ABSL_GUARDED_BY(mu_) = false;
  const absl::Time start_;
  absl::Time last_message_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace

void SendError(ResponseWriter& writer, const absl::Status& status, uint32_t retry_after_seconds) {
  HttpHeaders headers;
  if (status.code() == absl::StatusCode::kResourceExhausted || status.code() == absl::StatusCode::kUnavailable) {
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

std::string CompletionHandler::KeySaltOf(const HttpRequest& request) const {
  if (!options_.cache_salt_per_api_key) return "";
  const auto authorization = request.find(boost::beast::http::field::authorization);
  if (authorization == request.end()) return "";
  return ApiKeySaltPart({authorization->value().data(), authorization->value().size()});
}

void CompletionHandler::Handle(OpenAiKind kind, const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  WithBody(large_bodies_, request, std::move(writer), options_.retry_after_seconds,
           [this, kind, key_salt = KeySaltOf(request)](std::string_view body, std::shared_ptr<ResponseWriter> writer) {
             ParseAndDispatch(kind, body, key_salt, std::move(writer));
           });
}

void CompletionHandler::HandleResponses(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  WithBody(large_bodies_, request, std::move(writer), options_.retry_after_seconds,
           [this, key_salt = KeySaltOf(request)](std::string_view body, std::shared_ptr<ResponseWriter> writer) {
             absl::StatusOr<ResponsesRequest> parsed = ParseResponsesRequest(body);
             if (!parsed.ok()) return SendError(*writer, parsed.status(), options_.retry_after_seconds);
             if (absl::Status fits = CheckAnswerCanFit(parsed->chat, options_.max_response_bytes); !fits.ok()) {
               return SendError(*writer, parsed->params.Translate(std::move(fits)), options_.retry_after_seconds);
             }
             auto shaper =
                 std::make_unique<ResponsesOutputBuilder>(*parsed, NewResponsesId(), absl::ToUnixSeconds(absl::Now()));
             Dispatch(parsed->chat, key_salt, std::move(shaper), std::move(writer));
           });
}

void CompletionHandler::ParseAndDispatch(OpenAiKind kind, std::string_view body, const std::string& key_salt,
                                         std::shared_ptr<ResponseWriter> writer) {
  absl::StatusOr<OpenAiRequest> parsed =
      kind == OpenAiKind::kChat ? ParseChatCompletionRequest(body) : ParseCompletionRequest(body);
  if (!parsed.ok()) return SendError(*writer, parsed.status(), options_.retry_after_seconds);
  if (absl::Status fits = CheckAnswerCanFit(*parsed, options_.max_response_bytes); !fits.ok()) {
    return SendError(*writer, fits, options_.retry_after_seconds);
  }
  auto shaper = std::make_unique<ChatCompletionShaper>(*parsed, options_.system_fingerprint);
  Dispatch(*parsed, key_salt, std::move(shaper), std::move(writer));
}

void CompletionHandler::Dispatch(OpenAiRequest& parsed, const std::string& key_salt,
                                 std::unique_ptr<AnswerShaper> shaper, std::shared_ptr<ResponseWriter> writer) {
  auto generation = std::make_shared<Generation>(parsed, std::move(shaper), writer, metrics_, options_);
  std::vector<v1::GenerateRequest> generates;
  generates.push_back(std::move(parsed.generate));
  for (v1::GenerateRequest& further : parsed.further_prompts) generates.push_back(std::move(further));
  for (size_t i = 0; i < generates.size(); ++i) {
    // Each generation of a prompt list has its own id in the logs of both sides.
    generates[i].set_request_id(generates.size() == 1 ? writer->request_id()
                                                      : absl::StrCat(writer->request_id(), "-", i));
    if (options_.cache_salt_per_api_key) {
      generates[i].set_cache_salt(CombineCacheSalt(key_salt, generates[i].cache_salt()));
    }
  }
  generation->Run(dispatcher_, generates);
}

}  // namespace llmc::gateway
